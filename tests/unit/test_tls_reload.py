"""Goal: the pure core of TLS reloading (common/tls_reload.py) takes a rotated certificate and
refuses a file set that cannot be served: it looks at most once per interval, reads only when a
stamp moved, keeps the same bytes without a new generation, refuses a key that is not the
certificate's and garbage (saying so once per change, not at each look), and takes the next
good state after a refusal, as a rotation caught half-way needs.

Method: real certificates from samsa.cli.certificates (one CA, two leaves A and B), their bytes
given to `Reloader` with made-up stamps and a made-up clock; no stat, no read, no gRPC.
"""

from __future__ import annotations

import pytest
from cryptography import x509

from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.common.tls import TlsConfigError
from samsa.common.tls_reload import (
    CHECK_INTERVAL_S,
    FileSet,
    Refuse,
    Reloader,
    Take,
    check,
)

STAMPS_A = ((1, 10, 100), (2, 20, 200), (3, 30, 300))
STAMPS_B = ((4, 11, 101), (5, 21, 201), (3, 30, 300))  # certificate and key renamed over
GARBAGE = b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"


def files(pair: KeyPair, ca: KeyPair, key: KeyPair | None = None) -> FileSet:
    return FileSet(
        pair.certificate.read_bytes(), (key or pair).key.read_bytes(), ca.certificate.read_bytes()
    )


def serial(pair: KeyPair) -> int:
    return x509.load_pem_x509_certificate(pair.certificate.read_bytes()).serial_number


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("tls-reload")
    ca = create_ca(directory)
    return {
        "ca": ca,
        "a": issue(ca, directory, "broker-a", ["127.0.0.1"]),
        "b": issue(ca, directory, "broker-b", ["127.0.0.1"]),
    }


def test_the_files_are_looked_at_once_per_interval_and_read_only_when_a_stamp_moved(
    pki: dict[str, KeyPair],
) -> None:
    reloader = Reloader(files(pki["a"], pki["ca"]), STAMPS_A, now=50.0)
    assert not reloader.due(50.0 + CHECK_INTERVAL_S / 2)
    assert reloader.due(50.0 + CHECK_INTERVAL_S)
    assert not reloader.due(50.0 + CHECK_INTERVAL_S * 1.5)  # the interval started again
    assert reloader.due(50.0 + CHECK_INTERVAL_S * 2)
    assert not reloader.needs_read(STAMPS_A)
    assert reloader.needs_read(STAMPS_B)
    assert reloader.needs_read((STAMPS_A[0], STAMPS_A[1], None))  # the CA file went away


def test_a_rotated_certificate_is_taken_and_the_same_bytes_are_kept(
    pki: dict[str, KeyPair],
) -> None:
    reloader = Reloader(files(pki["a"], pki["ca"]), STAMPS_A, now=0.0)
    touched = ((1, 10, 999), *STAMPS_A[1:])
    assert reloader.offer(touched, files(pki["a"], pki["ca"])) is None  # same bytes: keep
    assert reloader.generation == 0
    taken = reloader.offer(STAMPS_B, files(pki["b"], pki["ca"]))
    assert isinstance(taken, Take)
    assert taken.summary.serial == serial(pki["b"])
    assert reloader.serving == files(pki["b"], pki["ca"])
    assert reloader.generation == 1
    described = str(taken.summary)
    assert "CN=broker-b" in described
    assert f"serial {serial(pki['b']):x}" in described
    assert "notAfter 20" in described
    assert not reloader.needs_read(STAMPS_B)


def test_a_key_that_is_not_the_certificates_is_refused_once_then_the_finished_rotation_taken(
    pki: dict[str, KeyPair],
) -> None:
    reloader = Reloader(files(pki["a"], pki["ca"]), STAMPS_A, now=0.0)
    half_way = ((4, 11, 101), *STAMPS_A[1:])  # B's certificate, A's key still
    refused = reloader.offer(half_way, files(pki["b"], pki["ca"], key=pki["a"]))
    assert isinstance(refused, Refuse)
    assert "ssl.key.location: the key does not match the certificate" in refused.reason
    assert f"serial {serial(pki['b']):x}" in refused.reason
    assert reloader.serving == files(pki["a"], pki["ca"])  # still A
    assert reloader.generation == 0
    assert not reloader.needs_read(half_way)  # said once: not read again until a stamp moves
    taken = reloader.offer(STAMPS_B, files(pki["b"], pki["ca"]))  # the key written too
    assert isinstance(taken, Take)
    assert taken.summary.serial == serial(pki["b"])
    assert reloader.generation == 1


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        ("certificate", "ssl.certificate.location: not a PEM certificate chain"),
        ("key", "ssl.key.location: not an unencrypted PEM private key"),
        ("ca", "ssl.ca.location: not a PEM bundle of CA certificates"),
    ],
)
def test_garbage_in_any_file_is_refused_naming_its_setting(
    pki: dict[str, KeyPair], broken: str, expected: str
) -> None:
    good = files(pki["b"], pki["ca"])
    garbage = FileSet(
        GARBAGE if broken == "certificate" else good.certificate,
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        if broken == "key"
        else good.key,
        GARBAGE if broken == "ca" else good.ca,
    )
    reloader = Reloader(files(pki["a"], pki["ca"]), STAMPS_A, now=0.0)
    refused = reloader.offer(STAMPS_B, garbage)
    assert isinstance(refused, Refuse)
    assert refused.reason.startswith(expected)
    assert reloader.serving == files(pki["a"], pki["ca"])
    with pytest.raises(TlsConfigError, match=expected):
        check(garbage)


def test_files_that_could_not_be_read_are_refused_with_the_readers_words(
    pki: dict[str, KeyPair],
) -> None:
    reloader = Reloader(files(pki["a"], pki["ca"]), STAMPS_A, now=0.0)
    gone = (None, *STAMPS_A[1:])
    error = TlsConfigError("ssl.certificate.location=/x/a.pem: cannot read it (No such file)")
    assert reloader.offer(gone, error) == Refuse(str(error))
    assert not reloader.needs_read(gone)
    assert reloader.generation == 0


def test_a_private_key_is_in_no_file_sets_repr(pki: dict[str, KeyPair]) -> None:
    loaded = files(pki["a"], pki["ca"])
    assert b"PRIVATE" not in repr(loaded).encode()
    assert "key=" not in repr(loaded)

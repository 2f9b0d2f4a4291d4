"""A private CA and the certificates signed by it, for `samsa up --tls`, `samsa certs` and tests.

Each certificate serves as a server's and as a client's (both extended key usages), so one
pair per process covers its listeners, its calls to its peers and, later, its identity; its
subject alternative names are the addresses it is dialled at (gRPC checks the name dialled
against them). Keys are ECDSA P-256 and written 0600, unencrypted, as gRPC needs them. Kept
small on purpose: an operator with their own PKI points the ssl.* settings at its files instead.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
CERTIFICATE_DAYS = 825  # the longest leaf lifetime browsers accept; an own PKI decides its own


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, as files."""

    certificate: Path
    key: Path


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` readable by its owner only, from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.chmod(path, 0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "samsa"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _subject_alternative_names(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def create_ca(directory: Path, common_name: str = "samsa-ca") -> KeyPair:
    """A self-signed CA in `directory` (ca.pem and ca-key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pair = KeyPair(directory / "ca.pem", directory / "ca-key.pem")
    directory.mkdir(parents=True, exist_ok=True)
    pair.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_private(pair.key, _key_pem(key))
    return pair


def issue(ca: KeyPair, directory: Path, name: str, hosts: list[str]) -> KeyPair:
    """A certificate for `name` (its common name and file stem: NAME.pem, NAME-key.pem) signed
    by `ca`, valid for the addresses `hosts` (IPs or DNS names)."""
    ca_certificate = x509.load_pem_x509_certificate(ca.certificate.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca.key}: not an EC key this module wrote")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CERTIFICATE_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if hosts:
        builder = builder.add_extension(_subject_alternative_names(hosts), critical=False)
    certificate = builder.sign(ca_key, hashes.SHA256())
    pair = KeyPair(directory / f"{name}.pem", directory / f"{name}-key.pem")
    directory.mkdir(parents=True, exist_ok=True)
    pair.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_private(pair.key, _key_pem(key))
    return pair

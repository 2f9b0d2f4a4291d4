"""Goal: a service takes rotated TLS files without a restart (services/runtime/
certificate_watch.py, through transport.py): every listener serves a new connection with the new
certificate, a channel dialled after the rotation presents the new client certificate, one made
before keeps working, and the credentials generation moves so that a ChannelCache dials again;
a CA added to the bundle lets its clients in from the next connection on (client auth
required); a set that cannot be served is refused with one error line however many handshakes
follow, the old certificate still served; a service does not start with a key that is not its
certificate's.

Method: certificates from samsa.cli.certificates in tmp_path, replaced the way an operator
should (write beside, rename over). The watch's clock is a counter the test moves, where the
test is about when it looks; through transport.configure, the real clock and a wait for the
condition. Served certificates are read with Python's ssl module (a TLS handshake, no gRPC
call); the certificate a channel presents, by a generic gRPC method that answers the caller's
certificate from its auth context.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from broker_tls_flags import broker_config, tls_flags
from cryptography import x509

from samsa.cli.certificates import KeyPair, create_ca, issue
from samsa.common.tls import TlsConfigError
from samsa.services.runtime import transport
from samsa.services.runtime.certificate_watch import CertificateWatch, Locations
from samsa.services.runtime.service_channels import ChannelCache

WHO = "/samsa.test.Who/Certificate"


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, KeyPair]:
    ca = create_ca(tmp_path / "tls")
    return {
        "ca": ca,
        "a": issue(ca, tmp_path / "issued", "broker-a", ["127.0.0.1"]),
        "b": issue(ca, tmp_path / "issued", "broker-b", ["127.0.0.1"]),
        "server": issue(ca, tmp_path / "issued", "server", ["127.0.0.1"]),
    }


@pytest.fixture
def served(tmp_path: Path, pki: dict[str, KeyPair]) -> KeyPair:
    """The files the service's settings name, holding certificate A."""
    live = KeyPair(tmp_path / "live" / "service.pem", tmp_path / "live" / "service-key.pem")
    live.certificate.parent.mkdir()
    shutil.copy(pki["a"].certificate, live.certificate)
    shutil.copy(pki["a"].key, live.key)
    return live


@pytest.fixture(autouse=True)
def plaintext_after() -> Iterator[None]:
    yield
    transport.configure(broker_config())


def replace(target: Path, source: Path) -> None:
    """Write beside, rename over: a reader sees the old file or the new one, never half."""
    beside = target.with_name(target.name + ".new")
    shutil.copy(source, beside)
    os.replace(beside, target)


def serial(pair: KeyPair) -> int:
    return x509.load_pem_x509_certificate(pair.certificate.read_bytes()).serial_number


def served_serial(port: int, ca: KeyPair) -> int:
    """The serial of the certificate a new TLS connection to `port` is served with."""
    context = ssl.create_default_context(cafile=str(ca.certificate))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as wrapped,
    ):
        der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_every_listener_serves_new_connections_with_the_rotated_certificate(
    pki: dict[str, KeyPair], served: KeyPair
) -> None:
    clock = Clock()
    watch = CertificateWatch(Locations(str(served.certificate), str(served.key)), "none", clock)

    async def main() -> None:
        server = grpc.aio.server()
        ports = [server.add_secure_port("127.0.0.1:0", watch.server_credentials()) for _ in "12"]
        await server.start()
        try:
            for port in ports:
                assert await asyncio.to_thread(served_serial, port, pki["ca"]) == serial(pki["a"])
            replace(served.key, pki["b"].key)
            replace(served.certificate, pki["b"].certificate)
            assert await asyncio.to_thread(served_serial, ports[0], pki["ca"]) == serial(pki["a"])
            clock.now += 1.0  # a second later: the next handshake looks at the files
            for port in ports:  # both listeners take it, not only the first to ask
                assert await asyncio.to_thread(served_serial, port, pki["ca"]) == serial(pki["b"])
        finally:
            await server.stop(0)

    asyncio.run(main())


def test_a_set_that_cannot_be_served_is_refused_once_and_the_old_certificate_kept(
    pki: dict[str, KeyPair], served: KeyPair, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    watch = CertificateWatch(Locations(str(served.certificate), str(served.key)), "none", clock)

    async def main() -> None:
        server = grpc.aio.server()
        port = server.add_secure_port("127.0.0.1:0", watch.server_credentials())
        await server.start()
        try:
            replace(served.certificate, pki["b"].certificate)  # half-way: A's key still
            for _ in range(3):
                clock.now += 1.0
                assert await asyncio.to_thread(served_serial, port, pki["ca"]) == serial(pki["a"])
            refusals = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert len(refusals) == 1, [r.getMessage() for r in refusals]
            assert "still serving the previous ones" in refusals[0].getMessage()
            assert "the key does not match the certificate" in refusals[0].getMessage()
            replace(served.key, pki["b"].key)  # the rotation finished
            clock.now += 1.0
            assert await asyncio.to_thread(served_serial, port, pki["ca"]) == serial(pki["b"])
            taken = [r.getMessage() for r in caplog.records if "took the rotated" in r.getMessage()]
            assert len(taken) == 1 and f"serial {serial(pki['b']):x}" in taken[0]
        finally:
            await server.stop(0)

    with caplog.at_level(logging.INFO, logger="samsa.services.runtime.certificate_watch"):
        asyncio.run(main())


def test_a_service_does_not_start_with_a_key_that_is_not_its_certificates(
    pki: dict[str, KeyPair],
) -> None:
    mismatched = KeyPair(pki["a"].certificate, pki["b"].key)
    with pytest.raises(TlsConfigError, match="the key does not match the certificate"):
        transport.configure(broker_config(*tls_flags(mismatched, pki["ca"], "none")))


async def who(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    """The PEM certificate the caller presented."""
    return context.auth_context()["x509_pem_cert"][0]


def who_server() -> grpc.aio.Server:
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(who)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("samsa.test.Who", {"Certificate": handler})]
    )
    return server


def test_clients_of_a_ca_added_to_the_bundle_are_let_in_from_then_on(
    pki: dict[str, KeyPair], served: KeyPair, tmp_path: Path
) -> None:
    bundle = tmp_path / "live" / "ca.pem"
    shutil.copy(pki["ca"].certificate, bundle)
    new_ca = create_ca(tmp_path / "new-ca", "samsa-ca-2")
    newcomer = issue(new_ca, tmp_path / "new-ca", "newcomer", ["127.0.0.1"])
    clock = Clock()
    where = Locations(str(served.certificate), str(served.key), str(bundle))
    watch = CertificateWatch(where, "required", clock)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=pki["ca"].certificate.read_bytes(),
        private_key=newcomer.key.read_bytes(),
        certificate_chain=newcomer.certificate.read_bytes(),
    )

    async def answered(endpoint: str) -> bool:
        async with grpc.aio.secure_channel(endpoint, credentials) as channel:
            try:
                await channel.unary_unary(WHO)(b"", timeout=5)
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE
                return False
        return True

    async def main() -> None:
        server = who_server()
        endpoint = f"127.0.0.1:{server.add_secure_port('127.0.0.1:0', watch.server_credentials())}"
        await server.start()
        try:
            assert not await answered(endpoint)  # the new CA is not in the bundle yet
            staged = bundle.with_name("ca.pem.new")
            staged.write_bytes(bundle.read_bytes() + new_ca.certificate.read_bytes())
            os.replace(staged, bundle)  # the old CA and the new one
            clock.now += 1.0
            assert await answered(endpoint)
        finally:
            await server.stop(0)

    asyncio.run(main())


def test_a_channel_dialled_after_a_rotation_presents_the_new_client_certificate(
    pki: dict[str, KeyPair], served: KeyPair
) -> None:
    assert transport.configure(broker_config(*tls_flags(served, pki["ca"])))
    credentials = grpc.ssl_server_credentials(
        [(pki["server"].key.read_bytes(), pki["server"].certificate.read_bytes())],
        root_certificates=pki["ca"].certificate.read_bytes(),
        require_client_auth=True,
    )

    async def presented(channel: grpc.aio.Channel) -> int:
        pem = await channel.unary_unary(WHO)(b"", timeout=5)
        return x509.load_pem_x509_certificate(pem).serial_number

    async def main() -> None:
        server = who_server()
        endpoint = f"127.0.0.1:{server.add_secure_port('127.0.0.1:0', credentials)}"
        await server.start()
        cache = ChannelCache()  # a holder of long-lived channels
        try:
            async with transport.dial(endpoint) as before:
                assert await presented(before) == serial(pki["a"])
                assert await presented(cache.get(endpoint)) == serial(pki["a"])
                assert transport.credentials_generation() == 0
                replace(served.key, pki["b"].key)
                replace(served.certificate, pki["b"].certificate)
                deadline = time.monotonic() + 10
                while True:  # within a second of the rotation, a new channel presents B
                    async with transport.dial(endpoint) as after:
                        if await presented(after) == serial(pki["b"]):
                            break
                    assert time.monotonic() < deadline, "new channels still present A"
                    await asyncio.sleep(0.1)
                assert await presented(before) == serial(pki["a"])  # the old one still works
                assert transport.credentials_generation() == 1
                assert await presented(cache.get(endpoint)) == serial(pki["b"])  # dialled again
        finally:
            await cache.close()
            await server.stop(0)

    asyncio.run(main())

"""How a service process binds its listeners and dials its peers: plaintext, or TLS with the
credentials its ssl.* settings name (common/tls.py), the same for every listener and every call.

`configure` runs once as the process starts (service_process.py), before any server or channel
exists; `bind`, `dial` and `dial_self` then follow the choice, so that no caller passes
credentials around and no channel can be made plaintext by mistake in an SSL process. The TLS
files are watched (certificate_watch.py): a listener serves each new connection with the newest
good files, and `dial` builds each new channel's credentials from them. A channel's
credentials are fixed when it is made (a reconnection presents them again), so the holders of
long-lived channels watch `credentials_generation` and dial again when it moves
(service_channels.ChannelCache).

A process dials itself (its health file's check) at a loopback or listen address its own
certificate may not name (a compose service's certificate names `broker-1`, not 127.0.0.1), so
`dial_self` checks the server's certificate against the first name in this process's own
certificate instead: the same certificate, so the same name.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from cryptography import x509

from samsa.common import tls
from samsa.services.runtime.certificate_watch import CertificateWatch, Locations
from samsa.services.runtime.service_config import ServiceConfig


@dataclass(frozen=True)
class _Transport:
    watch: CertificateWatch | None = None  # None: plaintext


_transport = _Transport()


def configure(config: ServiceConfig) -> bool:
    """Read the process's TLS files (TlsConfigError naming the one that is wrong); True when
    the process serves and dials TLS."""
    global _transport
    if config.security_protocol != tls.SSL:
        _transport = _Transport()
        return False
    settings = tls.TlsSettings.load(  # the settings' relations, each file's first checks
        ca_location=config.ssl_ca_location,
        certificate_location=config.ssl_certificate_location,
        key_location=config.ssl_key_location,
        client_auth=config.ssl_client_auth,
    )
    assert settings.certificate is not None  # check_tls: SSL comes with a certificate
    _own_name(settings.certificate)  # a certificate that does not parse stops the start here
    assert config.ssl_certificate_location is not None and config.ssl_key_location is not None
    where = Locations(
        config.ssl_certificate_location, config.ssl_key_location, config.ssl_ca_location
    )
    _transport = _Transport(CertificateWatch(where, config.ssl_client_auth))
    return True


def tls_enabled() -> bool:
    return _transport.watch is not None


def credentials_generation() -> int:
    """A number that moves each time the process takes rotated TLS files (plaintext: always
    0): channels dialled at an older one present the old certificate. Cheap enough for every
    use of a channel: the watch stats its files at most once a second."""
    if _transport.watch is None:
        return 0
    return _transport.watch.generation()


def bind(server: grpc.aio.Server, listen: str) -> int:
    """Add `listen` to `server` (TLS or not, as configured); the bound port, 0 when it could
    not bind."""
    if _transport.watch is None:
        return server.add_insecure_port(listen)
    return server.add_secure_port(listen, _transport.watch.server_credentials())


def dial(
    endpoint: str,
    options: Sequence[tuple[str, object]] = (),
    interceptors: Sequence[grpc.aio.ClientInterceptor] | None = None,
) -> grpc.aio.Channel:
    """A channel to a peer at `endpoint`, TLS or not, as configured; with TLS, it presents the
    newest good certificate and trusts the newest good CA bundle."""
    if _transport.watch is None:
        return grpc.aio.insecure_channel(endpoint, options=options, interceptors=interceptors)
    credentials = _transport.watch.settings().channel_credentials()
    return grpc.aio.secure_channel(
        endpoint, credentials, options=options, interceptors=interceptors
    )


def dial_self(address: str) -> grpc.aio.Channel:
    """A channel to this process's own listener at `address` (module docstring)."""
    if _transport.watch is None:
        return dial(address)
    certificate = _transport.watch.settings().certificate
    own_name = None if certificate is None else _own_name(certificate)
    if own_name is None:
        return dial(address)
    return dial(address, options=[("grpc.ssl_target_name_override", own_name)])


@functools.lru_cache(maxsize=2)  # the certificate served, and the one before a rotation
def _own_name(certificate_pem: bytes) -> str | None:
    """The first subject alternative name (DNS or IP) of the first certificate in the chain,
    else its common name; None when it has neither (the self-check then uses the address)."""
    try:
        certificate = x509.load_pem_x509_certificate(certificate_pem)
    except ValueError as error:
        raise tls.TlsConfigError(f"ssl.certificate.location: not a certificate ({error})") from None
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        names = None
    if names is not None:
        for name_type in (x509.DNSName, x509.IPAddress):
            found = names.get_values_for_type(name_type)
            if found:
                return str(found[0])
    common = certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(common[0].value) if common else None

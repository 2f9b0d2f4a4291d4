"""The certificates of a local TLS cluster (`samsa up --tls`), and the channels the launcher
dials it with.

Theory of operation. `<data-dir>/tls/` holds a private CA (ca.pem, ca-key.pem) made at the first
TLS start, and one certificate per process, named as the process, plus `client` for the CLI and
the SDK (cluster_spec.tls_pair names the files). Each is made once and reused at every later
start, so a client configured from a first run keeps working after a restart; a process the
cluster did not have before (a coordinator added at a restart) gets its certificate then, from
the same CA. Every certificate names 127.0.0.1 and localhost, the addresses the local processes
listen and are dialled at (gRPC checks the dialled name against them). The CA's key stays in the
directory (0600) because later certificates need it: a local cluster's CA, not an operator's PKI.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from samsa.cli import certificates
from samsa.cli.cluster_spec import CLIENT_CERTIFICATE, TLS_DIR, ClusterSpec, tls_pair
from samsa.common import tls as tls_settings
from samsa.common.tls import TlsSettings

HOSTS = ["127.0.0.1", "localhost"]


def ensure_certificates(spec: ClusterSpec, data_dir: Path) -> None:
    """The CA, each process's and the client's certificates of a TLS cluster, made where they
    are missing; nothing for a plaintext cluster."""
    if not spec.tls:
        return
    directory = data_dir / TLS_DIR
    ca = certificates.KeyPair(*tls_pair(data_dir, "ca"))
    if not ca.certificate.exists():
        if any(directory.glob("*.pem")):
            raise ValueError(
                f"{ca.certificate} is missing but {directory} holds certificates it signed: "
                f"restore it, or move {directory} away to make a new CA and certificates"
            )
        ca = certificates.create_ca(directory)
    for name in [*spec.process_names, CLIENT_CERTIFICATE]:
        certificate, key = tls_pair(data_dir, name)
        if not (certificate.exists() and key.exists()):
            certificates.issue(ca, directory, name, HOSTS)


def issue_client(data_dir: Path, name: str) -> dict[str, str]:
    """A client certificate for `name` (principal User:CN=<name>,O=samsa) from the TLS cluster's
    CA in `data_dir`, made once, and a client's settings presenting it: for tests and for trying
    ACLs with principals other than the CLI's super user."""
    directory = data_dir / TLS_DIR
    if name in ("ca", CLIENT_CERTIFICATE):
        raise ValueError(f"{name!r} is taken: the CA's or the CLI's certificate")
    certificate, key = tls_pair(data_dir, name)
    if not (certificate.exists() and key.exists()):
        ca = certificates.KeyPair(*tls_pair(data_dir, "ca"))
        certificates.issue(ca, directory, name, HOSTS)
    return {
        tls_settings.SECURITY_PROTOCOL: tls_settings.SSL,
        tls_settings.CA_LOCATION: str(tls_pair(data_dir, "ca")[0]),
        tls_settings.CERTIFICATE_LOCATION: str(certificate),
        tls_settings.KEY_LOCATION: str(key),
    }


def open_channel(endpoint: str, security: dict[str, str]) -> grpc.Channel:
    """A channel to `endpoint` with a client's `security` settings (ClusterSpec.client_security:
    TLS, or plaintext when empty)."""
    settings = TlsSettings.from_client_config(security)
    if settings is None:
        return grpc.insecure_channel(endpoint)
    return grpc.secure_channel(endpoint, settings.channel_credentials())

"""The certificates of a local TLS cluster (`samsa up --tls`), the first user of a SASL one
(`samsa up --sasl`), and the channels the launcher dials it with.

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

import os
import secrets
from pathlib import Path

import grpc

from samsa.cli import certificates
from samsa.cli.cluster_spec import (
    CLIENT_CERTIFICATE,
    SASL_BOOTSTRAP_FILE,
    SASL_MECHANISMS,
    SASL_PASSWORD_FILE,
    SASL_USER,
    TLS_DIR,
    ClusterSpec,
    tls_pair,
)
from samsa.client.client_tls import client_security
from samsa.common import tls as tls_settings

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


def ensure_sasl_credentials(spec: ClusterSpec, data_dir: Path) -> None:
    """A SASL cluster's first user: a random password for admin, and the controllers' bootstrap
    file naming it for both mechanisms, each made once and readable by their owner only."""
    if not spec.sasl:
        return
    directory = data_dir / TLS_DIR
    password_file = directory / SASL_PASSWORD_FILE
    if not password_file.exists():
        _write_private(password_file, secrets.token_urlsafe(24) + "\n")
    password = password_file.read_text().strip()
    bootstrap = directory / SASL_BOOTSTRAP_FILE
    if not bootstrap.exists():
        lines = [f"{m}=[name={SASL_USER},password={password}]" for m in SASL_MECHANISMS.split(",")]
        _write_private(bootstrap, "# samsa up --sasl: the first user\n" + "\n".join(lines) + "\n")


def _write_private(path: Path, text: str) -> None:
    """Create `path` holding `text`, mode 0600 from the start (never readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def open_channel(endpoint: str, security: dict[str, str]) -> grpc.Channel:
    """A channel to `endpoint` with a client's `security` settings (ClusterSpec.client_security:
    TLS, a login over TLS, or plaintext when empty)."""
    settings = client_security(security)
    if settings is None:
        return grpc.insecure_channel(endpoint)
    return grpc.secure_channel(endpoint, settings.channel_credentials())

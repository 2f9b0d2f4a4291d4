#!/usr/bin/env bash
# Writes the certificates deploy/docker-compose.tls.yml mounts (deploy/tls/, git-ignored):
#   ca.pem, ca-key.pem        a private CA (the key 0600, kept here to sign certificates added later)
#   SERVICE.pem, SERVICE-key.pem   one per compose service (controller-1..3, broker-1..3,
#                             coordinator-1..2), naming the service, localhost and 127.0.0.1: the
#                             addresses it is dialled at on the compose network and from the host
#   admin.pem, admin-key.pem  the clients' certificate (principal User:CN=admin,O=samsa, the super
#                             user when the authorizer is on), and client.properties naming these
#                             files for `samsa ... --command-config deploy/tls/client.properties`
# Keeps what exists: every service must trust the same CA, and a new CA would lock out the clients
# configured with the old one. Needs Samsa's Python (the README's setup makes .venv; PYTHON names
# another).
#   bash deploy/generate-certificates.sh [DIRECTORY]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
directory=${1:-"$here/tls"}
python=${PYTHON:-"$here/../.venv/bin/python"}
umask 077
"$python" - "$directory" <<'PYTHON'
import sys
from pathlib import Path

from samsa.cli import certificates

SERVICES = [
    "controller-1", "controller-2", "controller-3", "broker-1", "broker-2", "broker-3",
    "coordinator-1", "coordinator-2",
]
CLIENT = "admin"
directory = Path(sys.argv[1]).resolve()
ca = certificates.KeyPair(directory / "ca.pem", directory / "ca-key.pem")
if not ca.certificate.exists():
    if any(directory.glob("*.pem")):
        sys.exit(
            f"{ca.certificate} is missing but {directory} holds certificates it signed: restore "
            f"it, or move {directory} away to make a new CA and certificates"
        )
    certificates.create_ca(directory)
    print(f"wrote {ca.certificate}", file=sys.stderr)
for name in [*SERVICES, CLIENT]:
    certificate = directory / f"{name}.pem"
    if certificate.exists() and (directory / f"{name}-key.pem").exists():
        continue
    hosts = ["localhost", "127.0.0.1"] if name == CLIENT else [name, "localhost", "127.0.0.1"]
    certificates.issue(ca, directory, name, hosts)
    print(f"wrote {certificate}", file=sys.stderr)
properties = directory / "client.properties"
if not properties.exists():
    properties.write_text(
        "# samsa ... --command-config this file: TLS with the admin certificate\n"
        "security.protocol=SSL\n"
        f"ssl.ca.location={ca.certificate}\n"
        f"ssl.certificate.location={directory / CLIENT}.pem\n"
        f"ssl.key.location={directory / CLIENT}-key.pem\n"
    )
    print(f"wrote {properties}", file=sys.stderr)
# The public halves are for anyone (the containers' samsa user reads the CA and certificates
# through the mounts; the entrypoint copies each key to a 0600 file of its own).
for public in [ca.certificate, *(directory / f"{name}.pem" for name in [*SERVICES, CLIENT])]:
    public.chmod(0o644)
directory.chmod(0o755)
PYTHON

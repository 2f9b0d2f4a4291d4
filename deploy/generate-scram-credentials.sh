#!/usr/bin/env bash
# Writes the first user of the SASL overlay (deploy/docker-compose.sasl.yml) to deploy/sasl/
# (git-ignored), each file mode 0600:
#   scram-credentials   the controllers' bootstrap file (sasl.scram.bootstrap.credentials): admin,
#                       for SCRAM-SHA-256 and SCRAM-SHA-512, with one random password
#   admin.properties    a client's settings logging in as admin (SASL_SSL, SCRAM-SHA-512, the
#                       TLS directory's ca.pem), for `samsa ... --command-config` and the SDK
# as `samsa up --sasl` makes them. Keeps what exists: the password is made once, and a file
# missing is written again with the password the other holds (the cluster keeps the credential
# it was first given; the API changes it: `samsa users set-scram`).
#   bash deploy/generate-scram-credentials.sh [DIRECTORY [TLS_DIRECTORY]]
# TLS_DIRECTORY (else SAMSA_TLS_DIR, else deploy/tls) is where generate-certificates.sh wrote
# ca.pem; admin.properties names it by its absolute path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
directory=${1:-"$here/sasl"}
tls_directory=${2:-${SAMSA_TLS_DIR:-"$here/tls"}}
umask 077
python3 - "$directory" "$tls_directory" <<'PYTHON'
import re
import secrets
import sys
from pathlib import Path

USER = "admin"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_MECHANISM = "SCRAM-SHA-512"
directory = Path(sys.argv[1]).resolve()
ca = Path(sys.argv[2]).resolve() / "ca.pem"
bootstrap = directory / "scram-credentials"
properties = directory / "admin.properties"


def existing_password():
    """admin's password from whichever file exists, so that both keep naming the same one."""
    if bootstrap.exists():
        found = re.search(rf"name={USER},password=([^,\]]+)", bootstrap.read_text())
        if found:
            return found.group(1)
    if properties.exists():
        found = re.search(r"^sasl\.password=(.+)$", properties.read_text(), re.MULTILINE)
        if found:
            return found.group(1).strip()
    if bootstrap.exists() or properties.exists():
        sys.exit(f"{directory} holds a file without admin's password: fix it, or move it away")
    return None


directory.mkdir(mode=0o700, parents=True, exist_ok=True)
password = existing_password() or secrets.token_urlsafe(24)
if not bootstrap.exists():
    lines = [f"{mechanism}=[name={USER},password={password}]" for mechanism in MECHANISMS]
    bootstrap.write_text(
        "# the controllers' first user (sasl.scram.bootstrap.credentials)\n" + "\n".join(lines) + "\n"
    )
    print(f"wrote {bootstrap}", file=sys.stderr)
else:
    print(f"{bootstrap} exists; kept", file=sys.stderr)
if not properties.exists():
    if not ca.exists():
        print(f"{ca} does not exist yet: run deploy/generate-certificates.sh", file=sys.stderr)
    properties.write_text(
        "# samsa ... --command-config this file: a login as admin over TLS\n"
        "security.protocol=SASL_SSL\n"
        f"ssl.ca.location={ca}\n"
        f"sasl.mechanism={CLIENT_MECHANISM}\n"
        f"sasl.username={USER}\n"
        f"sasl.password={password}\n"
    )
    print(f"wrote {properties}", file=sys.stderr)
else:
    print(f"{properties} exists; kept", file=sys.stderr)
PYTHON

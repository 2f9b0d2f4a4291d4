"""Goal: deploy/docker-compose.sasl.yml covers every Samsa service of deploy/docker-compose.yml
(as the TLS overlay it sits on does), gives the bootstrap file to the controllers only, at the
path where samsa-entrypoint.sh copies the secret it mounts; and deploy/generate-scram-credentials.sh
writes a bootstrap file the controller parses and a client properties file logging in as the
same admin, both 0600, made once and kept.

Method: the compose files and the entrypoint are read as text (no YAML library is a dependency),
the service blocks split as test_prometheus_config.py splits them; the script runs for real in a
temporary directory (python3, no network), and its bootstrap file goes through the controller's
own parser. Whether the cluster then starts and logs admin in is test_compose_sasl.py's business
(a real engine).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from samsa.services.controller.scram_bootstrap import parse_bootstrap_credentials

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
BASE = (DEPLOY / "docker-compose.yml").read_text()
TLS = (DEPLOY / "docker-compose.tls.yml").read_text()
SASL = (DEPLOY / "docker-compose.sasl.yml").read_text()
ENTRYPOINT = (DEPLOY / "samsa-entrypoint.sh").read_text()
SCRIPT = DEPLOY / "generate-scram-credentials.sh"


def service_blocks(compose: str) -> dict[str, str]:
    """Each service's block under the top-level `services:` key, by name."""
    services = compose.split("\nservices:\n", 1)[1]
    services = re.split(r"\n(?=\S)", services, maxsplit=1)[0]  # up to the next top-level key
    blocks = re.split(r"\n(?=  [a-z0-9-]+:\n)", "\n" + services)
    return {m.group(1): b for b in blocks if (m := re.match(r"\s*([a-z0-9-]+):\n", b))}


def samsa_services() -> set[str]:
    return {
        name
        for name, block in service_blocks(BASE).items()
        if re.search(r'command: \["python", "-m", "samsa\.services\.', block)
    }


def test_the_overlay_covers_every_samsa_service_of_the_base_file_as_tls_does() -> None:
    assert len(samsa_services()) == 8
    assert set(service_blocks(SASL)) == samsa_services() == set(service_blocks(TLS))


def test_only_the_controllers_get_the_bootstrap_file_where_the_entrypoint_copies_it() -> None:
    copied = re.search(r'install .*-m 0600 "\$sasl_source" (\S+)', ENTRYPOINT)
    assert copied, "the entrypoint copies the SASL secret, 0600"
    (path,) = set(re.findall(r"SAMSA_SASL_SCRAM_BOOTSTRAP_CREDENTIALS: (\S+)", SASL))
    assert path == copied.group(1)
    source = re.search(r"sasl_source=\$\{SASL_SOURCE:-/run/secrets/(\S+)\}", ENTRYPOINT)
    assert source
    for name, block in service_blocks(SASL).items():
        controller = name.startswith("controller-")
        assert ("*sasl-controller-environment" in block) == controller, name
        assert (f"target: {source.group(1)}" in block) == controller, name


def test_every_service_logs_clients_in_instead_of_asking_for_certificates() -> None:
    shared = SASL.split("x-sasl-environment: &sasl-environment\n", 1)[1].split("\n\n", 1)[0]
    assert "SAMSA_SSL_CLIENT_AUTH: none" in shared
    assert "SAMSA_SASL_ENABLED_MECHANISMS: SCRAM-SHA-256,SCRAM-SHA-512" in shared
    assert "SAMSA_SUPER_USERS: ${SAMSA_SUPER_USERS:-User:admin}" in shared
    assert "<<: *sasl-environment" in SASL.split("x-sasl-controller-environment:", 1)[1]


def run_script(directory: Path, tls: Path) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), str(directory), str(tls)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr


def properties_of(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines if line)


def test_the_script_writes_admin_once_for_both_files_readable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    sasl, tls = tmp_path / "sasl", tmp_path / "tls"
    run_script(sasl, tls)
    bootstrap, properties = sasl / "scram-credentials", sasl / "admin.properties"
    assert {p.name: p.stat().st_mode & 0o777 for p in sasl.iterdir()} == {
        "scram-credentials": 0o600,
        "admin.properties": 0o600,
    }
    credentials = parse_bootstrap_credentials(bootstrap.read_text())
    assert {(c.name, c.mechanism.name) for c in credentials} == {
        ("admin", "SCRAM-SHA-256"),
        ("admin", "SCRAM-SHA-512"),
    }
    client = properties_of(properties)
    assert client == {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tls / "ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": credentials[0].password,
    }
    assert {c.password for c in credentials} == {client["sasl.password"]}
    assert len(client["sasl.password"]) >= 32

    # Kept as it is; a file lost is written again with the other's password.
    before = bootstrap.read_text()
    assert "kept" in run_script(sasl, tls)
    assert bootstrap.read_text() == before
    properties.unlink()
    run_script(sasl, tls)
    assert properties_of(properties) == client
    bootstrap.unlink()
    run_script(sasl, tls)
    assert bootstrap.read_text() == before

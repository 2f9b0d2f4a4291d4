"""Goal: deploy/docker-compose.sasl.yml, on top of the base file and the TLS overlay, on a real
Docker engine does what the README says: every service requires a SASL/SCRAM login over TLS
(no client certificate), the health checks still pass, the controllers create the first user,
admin, from the bootstrap file deploy/generate-scram-credentials.sh writes, and the `samsa`
commands on the host log in with its admin.properties to create a topic, produce and consume;
a wrong password is refused as a failed login, TLS without a login is refused as
unauthenticated, and with the authorizer on (SAMSA_AUTHORIZER_CLASS_NAME) a second user made
with `samsa users set-scram` logs in and is refused by the ACLs, admin being the super user.

Method. As test_compose_tls.py (compose_helpers.py): the image on the local base, a uniquely
named compose project, everything it creates removed in `finally`, the dockerd this test started
stopped by its PID, and the host's commands run with the advertised names resolving to 127.0.0.1
through a private /etc/hosts. The certificates and the credentials are written by the scripts
under test into a scratch directory that SAMSA_TLS_DIR and SAMSA_SASL_DIR point the overlays at,
so the checkout's deploy/tls/ and deploy/sasl/ are left alone. The whole 8-service cluster is
brought up.

Skipped, with the reason, where there is no Docker engine (as test_compose.py).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
from compose_helpers import (
    DEPLOY,
    HOST_BOOTSTRAP,
    REPO,
    SASL_OVERLAY,
    TLS_OVERLAY,
    TOOLS,
    Compose,
    on_host,
    overlay_run,
    run,
    write_hosts,
)

from samsa.services.runtime.sasl_gate import NO_TICKET

CLIENT = Path(__file__).with_name("compose_client.py")
SAMSA = str(REPO / ".venv/bin/samsa")
RECORDS = 50

missing = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"no Docker engine here: {missing} not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="dockerd and unshare --mount need root"),
    pytest.mark.timeout(900),
]


def test_sasl_overlay_requires_a_login_and_enforces_acls(engine: None) -> None:
    with overlay_run("sasl") as (run_id, image, scratch):
        secret = scratch / "cluster.secret"
        run("bash", str(DEPLOY / "generate-secret.sh"), str(secret))
        tls, sasl = scratch / "tls", scratch / "sasl"
        run("bash", str(DEPLOY / "generate-certificates.sh"), str(tls))
        run("bash", str(DEPLOY / "generate-scram-credentials.sh"), str(sasl), str(tls))
        hosts = write_hosts(scratch / "hosts")
        compose = Compose(
            f"samsasasltest{run_id}",
            image,
            secret,
            overlays=(TLS_OVERLAY, SASL_OVERLAY),
            environment={
                "SAMSA_TLS_DIR": str(tls),
                "SAMSA_SASL_DIR": str(sasl),
                "SAMSA_AUTHORIZER_CLASS_NAME": "standard",
            },
        )
        try:
            check_sasl_cluster(compose, hosts, tls, sasl, scratch)
        finally:
            compose.down()


def samsa(hosts: Path, properties: Path, *args: str, stdin: str | None = None) -> str:
    """A `samsa` command on the host against the published brokers, with `properties` as its
    --command-config; its stdout, or an AssertionError with its output."""
    return on_host(
        hosts, SAMSA, *args, "--bootstrap-server", HOST_BOOTSTRAP,
        "--command-config", str(properties), input=stdin, timeout_s=120,
    )  # fmt: skip


def private_properties(path: Path, text: str) -> Path:
    """`text` in `path`, readable by its owner only (it holds a password)."""
    path.touch(mode=0o600)
    path.write_text(text)
    return path


def check_sasl_cluster(compose: Compose, hosts: Path, tls: Path, sasl: Path, scratch: Path) -> None:
    admin = sasl / "admin.properties"
    assert f"ssl.ca.location={tls / 'ca.pem'}" in admin.read_text()
    assert {(p.name, p.stat().st_mode & 0o777) for p in sasl.iterdir()} == {
        ("admin.properties", 0o600),
        ("scram-credentials", 0o600),
    }
    up_started = time.monotonic()
    compose("up", "-d")
    compose.wait_healthy(up_started)
    print(f"up -> every container healthy (SASL): {time.monotonic() - up_started:.1f} s")
    on_host(
        hosts, "env", f"COMPOSE_CLIENT_PROPERTIES={admin}", str(REPO / ".venv/bin/python"),
        str(CLIENT), HOST_BOOTSTRAP, "wait-healthy", "3", "2",
    )  # fmt: skip
    print(f"up -> cluster healthy (brokers unfenced): {time.monotonic() - up_started:.1f} s")

    # admin (the bootstrap file's user, the super user): create, produce, consume from the host.
    samsa(hosts, admin, "topics", "create", "orders", "--partitions", "3",
          "--replication-factor", "3")  # fmt: skip
    values = [f"sasl-{i}" for i in range(RECORDS)]
    samsa(hosts, admin, "produce", "orders", stdin="".join(f"{v}\n" for v in values))
    consumed = samsa(hosts, admin, "consume", "orders", "--from-beginning",
                     "--count", str(RECORDS))  # fmt: skip
    assert sorted(consumed.split()) == sorted(values)
    (described,) = [
        line for line in samsa(hosts, admin, "users", "describe").splitlines() if "'admin'" in line
    ]
    assert "SCRAM-SHA-256" in described and "SCRAM-SHA-512" in described, described

    # A wrong password: the login itself is refused.
    lines = admin.read_text().splitlines()
    wrong = private_properties(
        scratch / "wrong.properties",
        "\n".join(
            "sasl.password=not-the-password" if line.startswith("sasl.password=") else line
            for line in lines
        )
        + "\n",
    )
    failed_login = "SASL authentication failed for user 'admin' .*SASL_AUTHENTICATION_FAILED"
    with pytest.raises(AssertionError, match=failed_login) as refused:
        samsa(hosts, wrong, "topics", "list")
    print(f"wrong password: {str(refused.value).strip().splitlines()[-1]}")

    # TLS with the CA but no login: connected, then refused as unauthenticated.
    no_login = private_properties(
        scratch / "tls-only.properties",
        f"security.protocol=SSL\nssl.ca.location={tls / 'ca.pem'}\n",
    )
    with pytest.raises(AssertionError, match=re.escape(NO_TICKET)) as refused:
        samsa(hosts, no_login, "topics", "list")
    print(f"no login: {str(refused.value).strip().splitlines()[-1]}")

    # A second user, made by admin (password on stdin), logs in and is refused by the ACLs.
    samsa(hosts, admin, "users", "set-scram", "--user", "bob", "--mechanism", "SCRAM-SHA-256",
          stdin="bob-secret\n")  # fmt: skip
    bob = private_properties(
        scratch / "bob.properties",
        f"security.protocol=SASL_SSL\nssl.ca.location={tls / 'ca.pem'}\n"
        "sasl.mechanism=SCRAM-SHA-256\nsasl.username=bob\nsasl.password=bob-secret\n",
    )
    refused_by_acls = "User:bob may not .* topic orders .*TOPIC_AUTHORIZATION_FAILED"
    with pytest.raises(AssertionError, match=refused_by_acls):
        samsa(hosts, bob, "produce", "orders", stdin="bob\n")
    with pytest.raises(AssertionError, match=refused_by_acls):
        samsa(hosts, bob, "consume", "orders", "--from-beginning", "--count", "1")

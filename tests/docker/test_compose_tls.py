"""Goal: deploy/docker-compose.tls.yml on a real Docker engine does what the README says: every
service serves TLS and requires a client certificate, the health checks still pass, the `samsa`
commands on the host produce and consume with `--command-config` and the admin certificate
deploy/generate-certificates.sh writes, and with the authorizer on (SAMSA_AUTHORIZER_CLASS_NAME)
the admin certificate is the super user while another certificate from the same CA, without
ACLs, is refused; a plaintext client gets no connection at all.

Method. As test_compose.py (its helpers, compose_helpers.py): the image on the local base, a
uniquely named compose project, everything it creates removed in `finally`, the dockerd this test
started stopped by its PID, and the host's commands run with the advertised names resolving to
127.0.0.1 through a private /etc/hosts. The certificates are written by the script under test into
a scratch directory that SAMSA_TLS_DIR points the overlay at, so the checkout's deploy/tls/ is left
alone. The whole 8-service cluster is brought up: on 2 cores it is healthy within seconds.

Skipped, with the reason, where there is no Docker engine (as test_compose.py).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from compose_helpers import (
    DEPLOY,
    HOST_BOOTSTRAP,
    REPO,
    TLS_OVERLAY,
    TOOLS,
    Compose,
    on_host,
    overlay_run,
    run,
    write_hosts,
)

from samsa.cli import certificates

CLIENT = Path(__file__).with_name("compose_client.py")
SAMSA = str(REPO / ".venv/bin/samsa")
RECORDS = 50

missing = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"no Docker engine here: {missing} not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="dockerd and unshare --mount need root"),
    pytest.mark.timeout(900),
]


def test_tls_overlay_requires_certificates_and_enforces_acls(engine: None) -> None:
    with overlay_run("tls") as (run_id, image, scratch):
        secret = scratch / "cluster.secret"
        run("bash", str(DEPLOY / "generate-secret.sh"), str(secret))
        tls = scratch / "tls"
        run("bash", str(DEPLOY / "generate-certificates.sh"), str(tls))
        hosts = write_hosts(scratch / "hosts")
        compose = Compose(
            f"samsatlstest{run_id}",
            image,
            secret,
            overlays=(TLS_OVERLAY,),
            environment={"SAMSA_TLS_DIR": str(tls), "SAMSA_AUTHORIZER_CLASS_NAME": "standard"},
        )
        try:
            check_tls_cluster(compose, hosts, tls, scratch)
        finally:
            compose.down()


def samsa(hosts: Path, properties: Path | None, *args: str, stdin: str | None = None) -> str:
    """A `samsa` command on the host against the published brokers, with `properties` as its
    --command-config (none: plaintext); its stdout, or an AssertionError with its output."""
    config = [] if properties is None else ["--command-config", str(properties)]
    return on_host(
        hosts, SAMSA, *args, "--bootstrap-server", HOST_BOOTSTRAP, *config, input=stdin,
        timeout_s=120,
    )  # fmt: skip


def check_tls_cluster(compose: Compose, hosts: Path, tls: Path, scratch: Path) -> None:
    admin = tls / "client.properties"
    up_started = time.monotonic()
    compose("up", "-d")
    compose.wait_healthy(up_started)
    print(f"up -> every container healthy (TLS): {time.monotonic() - up_started:.1f} s")
    on_host(
        hosts, "env", f"COMPOSE_CLIENT_PROPERTIES={admin}", str(REPO / ".venv/bin/python"),
        str(CLIENT), HOST_BOOTSTRAP, "wait-healthy", "3", "2",
    )  # fmt: skip
    print(f"up -> cluster healthy (brokers unfenced): {time.monotonic() - up_started:.1f} s")

    # The admin certificate (the super user): create, produce, consume from the host.
    samsa(hosts, admin, "topics", "create", "orders", "--partitions", "3",
          "--replication-factor", "3")  # fmt: skip
    values = [f"tls-{i}" for i in range(RECORDS)]
    samsa(hosts, admin, "produce", "orders", stdin="".join(f"{v}\n" for v in values))
    consumed = samsa(hosts, admin, "consume", "orders", "--from-beginning",
                     "--count", str(RECORDS))  # fmt: skip
    assert sorted(consumed.split()) == sorted(values)

    # Plaintext: no connection to a TLS listener.
    with pytest.raises(AssertionError, match="cannot reach the cluster"):
        samsa(hosts, None, "topics", "list")

    # A certificate the same CA signed, for a principal without ACLs: connected, then refused.
    ca = certificates.KeyPair(tls / "ca.pem", tls / "ca-key.pem")
    bob = certificates.issue(ca, scratch / "bob", "bob", ["localhost"])
    bob_properties = scratch / "bob" / "client.properties"
    bob_properties.write_text(
        admin.read_text()
        .replace(str(tls / "admin-key.pem"), str(bob.key))
        .replace(str(tls / "admin.pem"), str(bob.certificate))
    )
    assert str(bob.key) in bob_properties.read_text()
    refused = "User:CN=bob,O=samsa may not .* topic orders .*TOPIC_AUTHORIZATION_FAILED"
    with pytest.raises(AssertionError, match=refused):
        samsa(hosts, bob_properties, "produce", "orders", stdin="bob\n")
    with pytest.raises(AssertionError, match=refused):
        samsa(hosts, bob_properties, "consume", "orders", "--from-beginning", "--count", "1")

"""ACLs stored in the metadata log, managed with the installed `samsa acls`, end to end.

Goal: on a cluster with TLS and authorization on, `samsa acls` adds, lists and removes ACL
bindings as kafka-acls.sh does (Kafka's output lines, --producer/--consumer, --remove only with
--force, removing exactly the entries named), and the bindings are metadata: after the active
controller is killed with SIGKILL, the newly elected one answers them all, and takes new ones.

Method: 3 controllers and 1 broker started by acl_cluster.py (TLS and the authorizer on: every
process enforces ACLs; the CLI's client certificate is the super user), real processes stopped
by PID also on failure; the `samsa` script installed next to this Python, run as a
subprocess with --data-dir (its cluster.json gives the controllers and the TLS settings), or
with --bootstrap-server naming one controller and --command-config a properties file of the
cluster's client settings; the SDK Admin with those settings to find the active controller;
kill -9 by PID through the launcher.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_cluster import acl_cluster, principal
from cluster_helpers import wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin

pytestmark = pytest.mark.timeout(300)

SAMSA = Path(sys.executable).with_name("samsa")
ALICE = principal("alice")
BOB = principal("bob")
ORDERS = (
    "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
    "patternType=LITERAL)`: "
)


def entry(principal: str, operation: str, permission: str = "ALLOW") -> str:
    return f"(principal={principal}, host=*, operation={operation}, permissionType={permission})"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with acl_cluster(tmp_path_factory, "acl-cluster", controllers=3) as running:
        yield running


def samsa(cluster: LocalCluster, *args: str, at: str = "") -> subprocess.CompletedProcess[str]:
    """The installed `samsa acls` with the cluster's --data-dir; `at`: one controller's address
    instead of cluster.json's (with the cluster's client settings)."""
    environ = {k: v for k, v in os.environ.items() if k != "SAMSA_BOOTSTRAP"}
    where = ["--data-dir", str(cluster.data_dir)]
    if at:
        client = cluster.data_dir / "acl-client.properties"  # as `samsa up --tls` writes one
        settings = cluster.spec.client_security(cluster.data_dir)
        client.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        where += ["--bootstrap-server", at, "--command-config", str(client)]
    return subprocess.run(
        [str(SAMSA), "acls", *args, *where],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_add_list_remove_and_survive_the_active_controllers_kill(cluster: LocalCluster) -> None:
    added = ok(samsa(cluster, "--add", "--allow-principal", ALICE, "--operation", "Read",
                     "--operation", "describe", "--topic", "orders"))  # fmt: skip
    assert ORDERS.replace("Current", "Adding") in added
    ok(samsa(cluster, "--add", "--allow-principal", BOB, "--consumer", "--topic", "orders",
             "--group", "billing"))  # fmt: skip
    ok(samsa(cluster, "--add", "--deny-principal", BOB, "--operation", "Write", "--topic", "pay-",
             "--resource-pattern-type", "prefixed"))  # fmt: skip
    listed = ok(samsa(cluster, "--list", "--topic", "orders"))
    assert ORDERS in listed
    for who, operation in ((ALICE, "READ"), (ALICE, "DESCRIBE"), (BOB, "READ")):
        assert entry(who, operation) in listed
    assert "resourceType=GROUP" not in listed

    refused = samsa(cluster, "--remove", "--allow-principal", BOB, "--topic", "orders")
    assert refused.returncode == 2 and "--force" in refused.stderr
    removed = ok(samsa(cluster, "--remove", "--force", "--allow-principal", BOB, "--operation",
                       "Read", "--topic", "orders"))  # fmt: skip
    assert entry(BOB, "READ") in removed
    listed = ok(samsa(cluster, "--list", "--principal", BOB))
    assert entry(BOB, "READ") in listed, "bob's READ on the group stays"
    assert entry(BOB, "DESCRIBE") in listed and entry(BOB, "WRITE", "DENY") in listed
    assert "name=orders, patternType=LITERAL)`: \n \t" + entry(BOB, "DESCRIBE") in listed
    before = ok(samsa(cluster, "--list"))

    settings = {"bootstrap.servers": ",".join(c.endpoint for c in cluster.spec.controllers)}
    settings |= cluster.spec.client_security(cluster.data_dir)
    with Admin(settings) as admin:
        old = next(c.node_id for c in admin.describe_cluster().controllers if c.active)
    cluster.kill(f"controller-{old}")
    alive = [c for c in cluster.spec.controllers if c.node_id != old]

    def new_active() -> str | None:
        with Admin(settings | {"bootstrap.servers": ",".join(c.endpoint for c in alive)}) as admin:
            active = [c for c in admin.describe_cluster().controllers if c.active]
        return active[0].endpoint if active and active[0].node_id != old else None

    endpoint = wait_until("a new active controller", new_active, timeout_s=60)
    assert ok(samsa(cluster, "--list", at=endpoint)) == before, "every ACL, from the new one"
    ok(samsa(cluster, "--add", "--allow-principal", ALICE, "--operation", "Write", "--topic",
             "orders", at=endpoint))  # fmt: skip
    assert entry(ALICE, "WRITE") in ok(samsa(cluster, "--list", "--topic", "orders", at=endpoint))

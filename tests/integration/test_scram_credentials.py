"""Goal: users' SCRAM credentials are stored and administered with real processes (KIP-554): set
through a broker (which forwards AlterUserScramCredentials to the controller), described by the
broker from its own image and by the installed `samsa users`, replaced by a second set, deleted;
the bootstrap file (`sasl.scram.bootstrap.credentials`) creates its credential when the cluster
starts, and a controller restart keeps every credential without overwriting one the API changed
or bringing back one it deleted.

Method: 1 controller, 1 broker, plaintext (SASL enforcement is not needed to store credentials).
The controller starts with a 0600 bootstrap file naming `admin`. Admin is bootstrapped from the
broker alone. What the controller stored is checked against the password with the real replay of
its metadata log (cluster_helpers.controller_image): the keys derive from the password and the
salt, the password itself is nowhere. The controller is stopped (SIGTERM) and started again; every
process is stopped by PID as the cluster context ends, on failure too.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, controller_image, local_cluster, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.services.controller.scram_bootstrap_file import BOOTSTRAPPED

pytestmark = pytest.mark.timeout(300)

SAMSA = Path(sys.executable).with_name("samsa")
SHA256, SHA512 = scram.SCRAM_SHA_256, scram.SCRAM_SHA_512


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("scram")
    bootstrap = data_dir / "scram-bootstrap.txt"
    bootstrap.write_text(
        "# the first users\nSCRAM-SHA-256=[name=admin,password=admin-secret]\n"
        "SCRAM-SHA-256=[name=ops,password=ops-secret]\n"
    )
    bootstrap.chmod(0o600)
    settings = FAST_SETTINGS | {"sasl.scram.bootstrap.credentials": str(bootstrap)}
    with local_cluster(data_dir, 1, 1, settings) as running:
        yield running


def stored(cluster: LocalCluster, name: str, mechanism: scram.Mechanism) -> scram.ScramCredential:
    image = controller_image(cluster.spec.controllers[0].endpoint)
    return image.scram_credentials[(name, mechanism.number)]


def bootstrap_passes(cluster: LocalCluster) -> int:
    """How many times the controller applied the bootstrap file (each time it became active)."""
    return (cluster.data_dir / "logs" / "controller-1.log").read_text().count(BOOTSTRAPPED)


def samsa_users(cluster: LocalCluster, *args: str, stdin: str = "") -> str:
    command = [str(SAMSA), "users", *args, "--bootstrap-server", cluster.spec.brokers[0].endpoint]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_credentials_are_set_described_replaced_deleted_and_kept(cluster: LocalCluster) -> None:
    admin = Admin({"bootstrap.servers": cluster.spec.brokers[0].endpoint})
    try:
        # The bootstrap file's credential, written once the controller became active.
        found = wait_until(
            "the bootstrap file's admin credential",
            lambda: admin.describe_user_scram_credentials(["admin"])["admin"],
        )
        assert found == [ScramCredentialInfo("SCRAM-SHA-256", 4096)]
        assert bootstrap_passes(cluster) == 1
        boot = stored(cluster, "admin", SHA256)
        assert boot == scram.credential_for_password(SHA256, "admin-secret", boot.salt)
        # ops, deleted through the API, never comes back from the file (applied once).
        ops_gone = UserScramCredentialDeletion("ops", "SCRAM-SHA-256")
        assert admin.alter_user_scram_credentials([ops_gone]) == {"ops": None}

        info = ScramCredentialInfo("SCRAM-SHA-256", 8192)
        set_alice = UserScramCredentialUpsertion("alice", info, "alice-secret")
        assert admin.alter_user_scram_credentials([set_alice]) == {"alice": None}
        assert admin.describe_user_scram_credentials(["alice"]) == {"alice": [info]}
        alice = stored(cluster, "alice", SHA256)
        assert len(alice.salt) == 32
        assert alice == scram.credential_for_password(SHA256, "alice-secret", alice.salt, 8192)

        # The installed CLI: a password on stdin, then Kafka's lines.
        samsa_users(
            cluster,
            *("set-scram", "--user", "bob", "--mechanism", "SCRAM-SHA-512"),
            *("--iterations", "5000"),
            stdin="bob-secret\n",
        )
        lines = samsa_users(cluster, "describe").splitlines()
        assert lines == [
            "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-256=iterations=4096",
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=5000",
        ]
        bob = stored(cluster, "bob", SHA512)
        assert bob == scram.credential_for_password(SHA512, "bob-secret", bob.salt, 5000)

        # A second set replaces: new iterations, new keys; the old password no longer matches.
        again = UserScramCredentialUpsertion("alice", ScramCredentialInfo("SCRAM-SHA-256"), "new")
        assert admin.alter_user_scram_credentials([again]) == {"alice": None}
        assert admin.describe_user_scram_credentials(["alice"])["alice"][0].iterations == 4096
        replaced = stored(cluster, "alice", SHA256)
        assert replaced == scram.credential_for_password(SHA256, "new", replaced.salt)
        assert replaced.stored_key != alice.stored_key

        # All or nothing per user: an unknown deletion refuses bob's whole change.
        outcome = admin.alter_user_scram_credentials(
            [
                UserScramCredentialDeletion("bob", "SCRAM-SHA-512"),
                UserScramCredentialDeletion("bob", "SCRAM-SHA-256"),
            ]
        )
        assert outcome["bob"] is not None and outcome["bob"].code == ErrorCode.RESOURCE_NOT_FOUND
        samsa_users(cluster, "delete-scram", "--user", "alice", "--mechanism", "scram-sha-256")
        assert samsa_users(
            cluster, "describe", "--user", "alice", "--user", "bob"
        ).splitlines() == [
            "No SCRAM credentials for user-principal 'alice'",
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=5000",
        ]

        # The API changes admin's password: a restarted controller keeps it, not the file's.
        change_admin = UserScramCredentialUpsertion(
            "admin", ScramCredentialInfo("SCRAM-SHA-256", 6000), "rotated"
        )
        assert admin.alter_user_scram_credentials([change_admin]) == {"admin": None}
        rotated = stored(cluster, "admin", SHA256)
        cluster.kill("controller-1", signal.SIGTERM)
        cluster.start("controller-1")
        controller = Admin({"bootstrap.servers": cluster.spec.controllers[0].endpoint})
        try:
            expected = {
                "admin": [ScramCredentialInfo("SCRAM-SHA-256", 6000)],
                "bob": [ScramCredentialInfo("SCRAM-SHA-512", 5000)],
            }
            wait_until(  # once it has replayed its log (it may answer from less before)
                "the restarted controller describing admin's and bob's credentials",
                lambda: controller.describe_user_scram_credentials() == expected,
            )
            # Active again, it applied the file again, and wrote nothing over the API's admin.
            wait_until("the second bootstrap pass", lambda: bootstrap_passes(cluster) == 2)
            assert stored(cluster, "admin", SHA256) == rotated
            assert controller.describe_user_scram_credentials() == expected  # no ops again
        finally:
            controller.close()
    finally:
        admin.close()

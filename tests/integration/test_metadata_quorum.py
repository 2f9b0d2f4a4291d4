"""Goal: DescribeQuorum (KIP-595) on real processes tells an operator how the controller quorum
is doing: one leader among the 3 voters, every voter connected and at lag 0 once the quorum is
idle after some writes, the broker as an observer at the leader's metadata offset; after a
follower controller is killed (SIGKILL) and more metadata is written, that voter shows lag > 0
and not connected, and the answer still comes from the leader, whoever is asked: a controller
that is not active names the active one (NOT_CONTROLLER), a broker forwards the question, and
`samsa metadata-quorum describe` prints it.

Method: 3 controllers and 1 broker (local_cluster: every process stopped by PID on the way out,
also on failure). Admin bootstrapped from one controller, and another from the broker; topics
created as the metadata writes; the CLI asked through the broker (--replication) and through
the surviving follower (--status, redirected to the leader). Every check waits for its
condition (wait_until), never a fixed sleep.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_helpers import (
    FAST_SETTINGS,
    active_controller,
    controller_stub,
    local_cluster,
    wait_until,
)

from samsa.cli.launcher import LocalCluster
from samsa.cli.main import main as samsa_main
from samsa.client import Admin
from samsa.client.metadata_quorum import QuorumInfo
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("quorum"), 3, 1, FAST_SETTINGS) as running:
        yield running


def idle_and_caught_up(admin: Admin) -> QuorumInfo | None:
    info = admin.describe_metadata_quorum()
    voters_ok = len(info.voters) == 3 and all(v.lag == 0 and v.connected for v in info.voters)
    brokers = [o for o in info.observers if o.kind == "broker"]
    observer_ok = [b.replica_id for b in brokers] == [1] and brokers[0].lag == 0
    return info if voters_ok and observer_ok else None


def test_the_leader_describes_voters_and_observers_and_a_killed_follower_lags(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    controllers = {c.node_id: c.endpoint for c in cluster.spec.controllers}
    broker = cluster.spec.brokers[0].endpoint
    admin = Admin({"bootstrap.servers": controllers[1]})
    via_broker = Admin({"bootstrap.servers": broker})
    try:
        for name in ("q-a", "q-b"):
            admin.create_topic(name, num_partitions=1, replication_factor=1)
        info = wait_until("3 voters and the broker caught up", lambda: idle_and_caught_up(admin))
        leader = info.leader_id
        assert leader == wait_until(
            "an agreed active controller", lambda: active_controller(cluster.spec)
        )
        assert info.voters[0].replica_id == leader
        assert sorted(v.replica_id for v in info.voters) == [1, 2, 3]
        assert info.leader_epoch > 0 and info.high_watermark == info.voters[0].log_end_offset
        (observer,) = [o for o in info.observers if o.kind == "broker"]
        assert observer.log_end_offset == info.metadata_offset > 0
        assert observer.last_fetch_timestamp is not None
        assert all(v.last_caught_up_timestamp is not None for v in info.voters)

        assert via_broker.describe_metadata_quorum().leader_id == leader
        follower = min(node for node in controllers if node != leader)
        asked = controller_stub(controllers[follower]).DescribeQuorum(
            controller_pb2.DescribeQuorumRequest(), timeout=5
        )
        assert asked.status.error_code == ErrorCode.NOT_CONTROLLER
        assert asked.status.active_controller.node_id == leader

        cluster.kill(f"controller-{follower}")  # SIGKILL
        survivor = next(node for node in controllers if node not in (leader, follower))
        admin = Admin({"bootstrap.servers": f"{controllers[leader]},{controllers[survivor]}"})
        for name in ("q-c", "q-d"):
            admin.create_topic(name, num_partitions=1, replication_factor=1)

        def dead_voter_lags() -> QuorumInfo | None:
            info = admin.describe_metadata_quorum()
            dead = next(v for v in info.voters if v.replica_id == follower)
            return info if dead.lag > 0 and not dead.connected else None

        info = wait_until(f"controller {follower} lagging, not connected", dead_voter_lags)
        assert info.leader_id == leader, "the quorum kept its leader"
        dead = next(v for v in info.voters if v.replica_id == follower)
        assert dead.log_end_offset < info.voters[0].log_end_offset
        assert info.max_follower_lag == dead.lag > 0
        assert via_broker.describe_metadata_quorum().leader_id == leader

        capsys.readouterr()
        argv = ["metadata-quorum", "describe", "--replication", "--bootstrap-server", broker]
        assert samsa_main(argv) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
        assert rows[0][0] == str(leader) and rows[0][5] == "Leader"
        followers = [row for row in rows if row[5] == "Follower"]  # broker ids may be theirs too
        (dead_row,) = [row for row in followers if row[0] == str(follower)]
        assert dead_row[5:] == ["Follower", "(not", "connected)"] and int(dead_row[2]) > 0
        assert [row[5] for row in rows].count("Observer") == 1
        argv = [
            "metadata-quorum",
            "describe",
            "--status",
            "--bootstrap-server",
            controllers[survivor],
        ]
        assert samsa_main(argv) == 0
        status = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
        assert status["LeaderId"].strip() == str(leader)
        assert int(status["MaxFollowerLag"]) > 0 and status["CurrentObservers"].strip() == "[1]"
    finally:
        admin.close()
        via_broker.close()

"""Goal: leader elections on an operator's request (KIP-460's ElectLeaders) work with real
processes, through a broker that forwards them to the controller: a preferred election gives
leadership back to the first replica once it is in sync again, a producer going on across it,
and a second one needs none; an unclean election brings back a partition whose only in-sync
replica crashed, with the out-of-sync replica as leader accepting writes, and the records only
the crashed replica held lost (as documented).

Method: 1 controller, 3 brokers, sessions of 3 s, the controller's automatic preferred election
off (leader.imbalance.check.interval.ms=0) so that only the request moves leaders. Everything
goes through the address of a broker the test does not stop (Admin, Producer, Consumer and the
`samsa leader-election` CLI), which forwards the elections to the controller.
(a) RF 3: the preferred replica P is stopped cleanly (leadership moves) and started again; once
it is back in the ISR it still does not lead; Admin.elect_leaders("preferred") makes it leader,
records sent before and after by one producer are all acknowledged and read back, and the CLI
then says a valid replica is already elected. (b) RF 2, min.insync.replicas 1, unclean election
not enabled: the follower F is stopped cleanly (it leaves the ISR), records are written to the
leader L alone, L is killed with SIGKILL (the partition goes offline, its ISR [L]) and F started
again: it stays offline until `samsa leader-election --election-type unclean` elects F (alone in
the ISR), which then accepts writes. L is started again at the end (it follows F).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, read_to_end, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.cli.main import main as samsa_main
from samsa.client import Admin, Producer
from samsa.client.admin import ElectionError
from samsa.client.cluster_admin import PartitionInfo
from samsa.common.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

SETTINGS = dict(
    FAST_SETTINGS,
    **{"replica.lag.time.max.ms": "2000", "leader.imbalance.check.interval.ms": "0"},
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("elect"), 1, 3, SETTINGS) as running:
        yield running


def endpoint_besides(cluster: LocalCluster, *stopped: int) -> str:
    """The address of a broker the test does not stop: every call goes through it."""
    return next(b.endpoint for b in cluster.spec.brokers if b.broker_id not in stopped)


def created(cluster: LocalCluster, topic: str, factor: int, **configs: str) -> PartitionInfo:
    """Create `topic` (1 partition) and wait for its replicas all in sync."""
    with Admin({"bootstrap.servers": endpoint_besides(cluster)}) as admin:
        admin.create_topic(topic, num_partitions=1, replication_factor=factor, configs=configs)
        return wait_until(
            f"{factor} in-sync replicas",
            lambda: len((p := partition(admin, topic)).isr) == factor and p,
        )


def partition(admin: Admin, topic: str) -> PartitionInfo:
    return admin.describe_topics([topic])[topic].partitions[0]


def unfenced(admin: Admin, broker_id: int) -> bool:
    return any(b.broker_id == broker_id and not b.fenced for b in admin.describe_cluster().brokers)


def send_all(producer: Producer, topic: str, values: list[bytes]) -> None:
    futures = [producer.send(topic, value, partition=0) for value in values]
    producer.flush(timeout=30)
    for future in futures:
        future.result(timeout=30)  # raises when a record was not acknowledged


def test_preferred_election_gives_leadership_back(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = "preferred"
    preferred = created(cluster, topic, 3).replicas[0]
    via = endpoint_besides(cluster, preferred)
    with Admin({"bootstrap.servers": via}) as admin:
        with Producer({"bootstrap.servers": via, "acks": "all"}) as producer:
            send_all(producer, topic, [b"before-%d" % i for i in range(20)])
            cluster.kill(f"broker-{preferred}", signal.SIGTERM)
            moved = wait_until(
                "the leadership to move",
                lambda: (p := partition(admin, topic)).leader not in (-1, preferred) and p,
            )
            cluster.start(f"broker-{preferred}")
            back = wait_until(
                f"broker {preferred} back in the ISR",
                lambda: preferred in (p := partition(admin, topic)).isr and len(p.isr) == 3 and p,
            )
            assert back.leader == moved.leader, "no election of its own: the loop is off"
            results = admin.elect_leaders("preferred", [(topic, 0)])
            assert results == {(topic, 0): None}
            elected = partition(admin, topic)
            assert elected.leader == preferred and elected.leader_epoch > back.leader_epoch
            send_all(producer, topic, [b"after-%d" % i for i in range(20)])
        values = [value for _, _, value in read_to_end(via, [(topic, 0)], "read_uncommitted")]
        assert values == [b"before-%d" % i for i in range(20)] + [
            b"after-%d" % i for i in range(20)
        ]

    capsys.readouterr()
    argv = ["leader-election", "--election-type", "preferred", "--topic", topic]
    assert samsa_main([*argv, "--bootstrap-server", via]) == 0
    assert f"Valid replica already elected for partitions {topic}-0" in capsys.readouterr().out
    assert cluster.exited() == {}


def test_unclean_election_brings_an_offline_partition_back(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = "unclean"
    placed = created(cluster, topic, 2, **{"min.insync.replicas": "1"})
    via = endpoint_besides(cluster, *placed.replicas)
    with Admin({"bootstrap.servers": via}) as admin:
        leader = placed.leader
        follower = next(r for r in placed.replicas if r != leader)
        with Producer({"bootstrap.servers": via, "acks": "all"}) as producer:
            send_all(producer, topic, [b"both-%d" % i for i in range(10)])
            cluster.kill(f"broker-{follower}", signal.SIGTERM)
            wait_until(
                "the follower out of the ISR", lambda: partition(admin, topic).isr == (leader,)
            )
            send_all(producer, topic, [b"lost-%d" % i for i in range(10)])
        cluster.kill(f"broker-{leader}", signal.SIGKILL)
        cluster.start(f"broker-{follower}")
        wait_until(
            "the follower back, the partition still offline",
            lambda: unfenced(admin, follower) and not unfenced(admin, leader),
        )
        offline = partition(admin, topic)
        assert (offline.leader, offline.isr) == (-1, (leader,)), "unclean election is not enabled"
        with pytest.raises(ElectionError) as refused:  # fenced, or out of the ISR
            admin.elect_leaders("preferred", [(topic, 0)])
        assert refused.value.code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

        capsys.readouterr()
        argv = ["leader-election", "--election-type", "unclean", "--topic", topic]
        assert samsa_main([*argv, "--partition", "0", "--bootstrap-server", via]) == 0
        out = capsys.readouterr().out
        assert f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0" in out
        elected = partition(admin, topic)
        assert (elected.leader, elected.isr) == (follower, (follower,))
        assert elected.leader_epoch > offline.leader_epoch

        with Producer({"bootstrap.servers": via, "acks": "all"}) as producer:
            send_all(producer, topic, [b"after-%d" % i for i in range(10)])
        values = [value for _, _, value in read_to_end(via, [(topic, 0)], "read_uncommitted")]
        both = [b"both-%d" % i for i in range(10)]
        assert values == both + [b"after-%d" % i for i in range(10)], "what only L held is lost"

        results = admin.elect_leaders("unclean", [(topic, 0)])
        assert results[(topic, 0)].code == ErrorCode.ELECTION_NOT_NEEDED  # type: ignore[union-attr]
        cluster.start(f"broker-{leader}")
        wait_until(f"broker {leader} back", lambda: unfenced(admin, leader))
    assert cluster.exited() == {}

"""Replication as consumers see it, with real processes: after an unclean leader election the
consumer notices the lost records by their epoch (KIP-320) and reads what replaced them instead
of skipping it; a consumer with client.rack reads from an in-sync follower in its rack (KIP-392).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from cluster_helpers import local_cluster, wait_until
from replication_helpers import SETTINGS, create_replicated, partition_state, wait_full_isr

from samsa.client import Admin, Consumer, NewTopic, Producer

pytestmark = pytest.mark.timeout(600)


def test_unclean_election_is_detected_by_consumers_instead_of_skipping(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With unclean.leader.election.enable an out-of-sync replica may lead and lose records a
    consumer already read; the consumer must notice (last fetched epoch) and go back to where
    the logs diverged, so it reads what replaced them instead of skipping it."""
    with local_cluster(tmp_path, controllers=1, brokers=2, settings=SETTINGS) as cluster:
        bootstrap = cluster.spec.bootstrap_servers
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics(
                [NewTopic("unclean", 1, 2, {"unclean.leader.election.enable": "true"})]
            )
        state = wait_until(
            "a full ISR",
            lambda: (
                (s := partition_state(cluster, "unclean")).leader >= 0 and len(s.isr) == 2 and s
            ),
        )
        leader, follower = state.leader, next(r for r in state.replicas if r != state.leader)
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "auto.offset.reset": "earliest",
                "max.poll.records": 1000,
            }
        )
        consumer.assign([("unclean", 0)])

        def consume_until(count: int) -> list:
            got: list = []
            while len(got) < count:
                records = consumer.poll(timeout=30)
                assert records, f"nothing after {len(got)}"
                got += records
            return got

        with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
            for n in range(100):
                producer.send("unclean", b"old-%d" % n)
        consume_until(100)
        cluster.kill(f"broker-{follower}", signal.SIGSTOP)
        wait_until(
            "the ISR to shrink", lambda: tuple(partition_state(cluster, "unclean").isr) == (leader,)
        )
        with Producer({"bootstrap.servers": bootstrap, "acks": 1}) as producer:
            for n in range(50):
                producer.send("unclean", b"lost-%d" % n)
        assert [r.offset for r in consume_until(50)][-1] == 149
        cluster.kill(f"broker-{leader}")
        cluster.kill(f"broker-{follower}", signal.SIGCONT)
        wait_until(
            "the out-of-sync replica to lead",
            lambda: partition_state(cluster, "unclean").leader == follower,
            timeout_s=60,
        )
        with Producer({"bootstrap.servers": bootstrap, "acks": 1}) as producer:
            for n in range(10):
                producer.send("unclean", b"new-%d" % n)
        after = consume_until(10)
        consumer.close()
        assert [(r.offset, r.value) for r in after[:10]] == [
            (100 + n, b"new-%d" % n) for n in range(10)
        ], "the consumer skipped the records that replaced the lost ones"
        assert "log truncation detected" in caplog.text


def test_consumers_read_from_an_in_sync_follower_in_their_rack(tmp_path: Path) -> None:
    from dataclasses import replace

    from samsa.cli.launcher import new_cluster_spec

    spec = new_cluster_spec(1, 3, SETTINGS)
    spec = replace(
        spec,
        brokers=tuple(replace(b, rack=f"rack-{b.broker_id}") for b in spec.brokers),
    )
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "cluster.json").write_text(spec.to_json())
    with local_cluster(tmp_path, controllers=1, brokers=3, settings=SETTINGS) as cluster:
        create_replicated(cluster, "racked")
        state = wait_full_isr(cluster, "racked")
        follower = next(r for r in state.replicas if r != state.leader)
        with Producer({"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all"}) as p:
            for n in range(1000):
                p.send("racked", b"r-%d" % n)
        with Consumer(
            {
                "bootstrap.servers": cluster.spec.bootstrap_servers,
                "auto.offset.reset": "earliest",
                "client.rack": f"rack-{follower}",
            }
        ) as consumer:
            consumer.assign([("racked", 0)])
            values = []
            while len(values) < 1000:
                records = consumer.poll(timeout=30)
                assert records, f"nothing after {len(values)}"
                values += [r.value for r in records]
            assert consumer._read_replicas.get(("racked", 0)) == follower
        assert values == [b"r-%d" % n for n in range(1000)]

"""Partition scale as real processes: thousands of idle partitions are followed through fetch
sessions, stay fully in sync while idle, and data written to one of them still reaches its
followers and a consumer assigned all of them (which fetches in sessions too).

Method: 3 brokers, a 2,000-partition RF 2 topic (bounded for CI's two cores) beside a busy
1-partition RF 3 topic, replica.lag.time.max.ms of 2 s. After several lag windows of idleness
every idle partition must still have its full ISR: a follower in a session names an idle
partition in no request, so this fails if the leader's ISR upkeep does not count its fetches.
Brokers log each fetch session they open; each (leader, follower) pair must open few (sessions
are kept, not re-opened per fetch). Behaviour only, no timing assertions.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, admin_write, local_cluster, wait_until

from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.v1 import controller_pb2

pytestmark = pytest.mark.timeout(600)

IDLE_PARTITIONS = 2_000
BURST_PARTITIONS = 5_000  # one broker opening them all at once stalls past the session timeout
LAG_MS = 2_000
SETTINGS = dict(FAST_SETTINGS, **{"replica.lag.time.max.ms": str(LAG_MS)})


def partitions(cluster, topic: str):  # type: ignore[no-untyped-def]
    """Every partition of `topic`, following next_cursor: IDLE_PARTITIONS is exactly one page at
    the controller's default limit today, and this stays right if either changes."""
    request = controller_pb2.DescribeTopicsRequest(names=[topic])
    states = []
    while True:
        answer = admin_write(cluster.spec, "DescribeTopics", request)
        states += answer.topics[0].partitions
        if not answer.HasField("next_cursor"):
            return states
        request.cursor.CopyFrom(answer.next_cursor)


def all_in_sync(cluster, topic: str, replication: int) -> bool:  # type: ignore[no-untyped-def]
    states = partitions(cluster, topic)
    return bool(states) and all(s.leader >= 0 and len(s.isr) == replication for s in states)


def sessions_opened(data_dir: Path) -> Counter[tuple[str, int]]:
    """(leader service, follower id) -> fetch sessions the leader opened for that follower."""
    opened: Counter[tuple[str, int]] = Counter()
    for path in (data_dir / "logs").glob("broker-*.log"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("msg") == "fetch session opened":
                opened[(entry["service"], entry["replica_id"])] += 1
    return opened


def test_idle_partitions_stay_in_sync_through_fetch_sessions_and_data_flows(
    tmp_path: Path,
) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=3, settings=SETTINGS) as cluster:
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
        with Admin(config) as admin:
            admin.create_topics(
                [
                    NewTopic("idle", IDLE_PARTITIONS, 2),
                    NewTopic("busy", 1, 3, {"min.insync.replicas": "2"}),
                ]
            )
        wait_until("idle in sync", lambda: all_in_sync(cluster, "idle", 2), 120)
        wait_until("busy in sync", lambda: all_in_sync(cluster, "busy", 3), 60)

        time.sleep(3 * LAG_MS / 1000)  # several lag windows with nothing written
        states = partitions(cluster, "idle")
        shrunk = [s.partition for s in states if len(s.isr) != 2]
        assert not shrunk, f"{len(shrunk)} idle partitions left the ISR, e.g. {shrunk[:5]}"

        with Producer(dict(config, acks="all", **{"linger.ms": 0})) as producer:
            sent = [producer.send("busy", b"busy-%d" % n, partition=0) for n in range(50)]
            sent.append(producer.send("idle", b"one idle partition woke", partition=1234))
            producer.flush(30)
        for future in sent:
            future.result(timeout=1)  # raises if acks=all was not met

        with Consumer(dict(config, **{"auto.offset.reset": "earliest"})) as consumer:
            # Assigned every idle partition too: its fetch sessions name them once, then
            # only what moves, and answers carry only the partitions with records.
            consumer.assign([("busy", 0)] + [("idle", p) for p in range(IDLE_PARTITIONS)])
            seen: dict[str, list[bytes]] = {"busy": [], "idle": []}

            def consumed() -> bool:
                for record in consumer.poll(timeout=1):
                    seen[record.topic].append(record.value)
                return len(seen["busy"]) == 50 and len(seen["idle"]) == 1

            wait_until("the records to be consumed", consumed, 60)
        assert seen["busy"] == [b"busy-%d" % n for n in range(50)]
        assert seen["idle"] == [b"one idle partition woke"]
        # acks=all on an RF 2 partition answered: the follower holds it, and both stay in sync.
        state = partitions(cluster, "idle")[1234]
        assert len(state.isr) == 2

        opened = sessions_opened(tmp_path)
        assert opened, "no broker opened a fetch session"
        followers_of = Counter(leader for leader, replica in opened if replica >= 0)
        assert len(followers_of) == 3, f"every broker leads some partitions: {opened}"
        consumer_sessions = {leader for leader, replica in opened if replica < 0}
        assert len(consumer_sessions) == 3, f"the consumer fetched in sessions: {opened}"
        churn = {pair: n for pair, n in opened.items() if n > 3}
        assert not churn, f"sessions were re-opened instead of kept: {churn}"


def test_creating_thousands_of_partitions_at_once_fences_no_broker(tmp_path: Path) -> None:
    """One CreateTopics of 5,000 partitions at RF 3: every broker opens 5,000 logs at once. A
    broker that does it in one go stalls its event loop for seconds, past the 3 s session
    timeout, is fenced,
    and one broker ends up leading everything; applied a slice at a time, heartbeats go on, no
    broker is fenced, and leadership stays spread."""
    with local_cluster(tmp_path, controllers=1, brokers=3, settings=SETTINGS) as cluster:
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
        with Admin(config) as admin:
            admin.create_topics([NewTopic("burst", BURST_PARTITIONS, 3)])
        # acks=all to the last partition (applied last) answers once its leader and both
        # followers have opened it, i.e. once every broker has applied the whole create.
        with Producer(dict(config, acks="all", **{"linger.ms": 0})) as producer:
            last = producer.send("burst", b"applied", partition=BURST_PARTITIONS - 1)
            producer.flush(120)
        last.result(timeout=1)
        wait_until("burst in sync", lambda: all_in_sync(cluster, "burst", 3), 180)
        controller_log = (tmp_path / "logs" / "controller-1.log").read_text()
        fenced = [line for line in controller_log.splitlines() if "sessions expired" in line]
        assert not fenced, f"brokers were fenced while opening the logs: {fenced[:2]}"
        leaders = Counter(state.leader for state in partitions(cluster, "burst"))
        assert len(leaders) == 3 and min(leaders.values()) >= BURST_PARTITIONS // 5, leaders

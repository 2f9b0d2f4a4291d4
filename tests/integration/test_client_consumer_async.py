"""Goal: AsyncConsumer, the consumer driver on the caller's own event loop, reads back everything
a producer wrote, in order per partition, and its seeks, pauses, positions and offset lookups
behave as the sync Consumer's do; in a group, two AsyncConsumers share the topic (coroutine
listeners awaited), commit, close() leaves the group, and a later member starts at the committed
offsets.

Method: a real local cluster (1 controller, 2 brokers, 1 coordinator) and a 2-partition topic
filled by the sync Producer; each test runs one coroutine with asyncio.run and bounded poll
timeouts.
"""

from __future__ import annotations

import asyncio

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster

from samsa.client import (
    Admin,
    AsyncConsumer,
    Consumer,
    ConsumerRebalanceListener,
    KafkaError,
    NewTopic,
    Producer,
)
from samsa.common.errors import OffsetOutOfRangeError

pytestmark = pytest.mark.timeout(180)
TOPIC = "async-events"
PARTITIONS = 2
RECORDS = 3_000
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    # No test here stops a service, so brokers keep the default session (FAST_SETTINGS' 3 s
    # could fence a broker of a machine busy enough, and with it the groups' partitions).
    settings = {
        "broker.heartbeat.interval.ms": FAST_SETTINGS["broker.heartbeat.interval.ms"],
        "offsets.topic.num.partitions": "2",
        "transaction.state.log.num.partitions": "2",
        "group.consumer.heartbeat.interval.ms": "200",
    }
    data_dir = tmp_path_factory.mktemp("async")
    with local_cluster(data_dir, 1, 2, settings, coordinators=1) as running:
        yield running


@pytest.fixture(scope="module")
def produced(cluster) -> dict[int, list[bytes]]:
    """partition -> values in offset order."""
    bootstrap = cluster.spec.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        futures = [
            (n, producer.send(TOPIC, b"v-%d" % n, partition=n % PARTITIONS, timestamp=BASE_TS + n))
            for n in range(RECORDS)
        ]
        producer.flush()
    for n, future in futures:
        metadata = future.result(timeout=0)
        assert metadata.offset == len(sent[metadata.partition])
        sent[metadata.partition].append(b"v-%d" % n)
    return sent


def config(cluster, **settings: object) -> dict[str, object]:
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        "auto.offset.reset": "earliest",
        **settings,
    }


async def poll_until(consumer: AsyncConsumer, count: int) -> list:
    records: list = []
    while len(records) < count:
        batch = await consumer.poll(timeout=10)
        assert batch, f"nothing after {len(records)} of {count} records"
        records += batch
    return records


def test_every_record_comes_back_in_order_per_partition(cluster, produced) -> None:
    async def main() -> None:
        async with AsyncConsumer(config(cluster, **{"max.poll.records": 700})) as consumer:
            await consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
            records = await poll_until(consumer, RECORDS)
            assert len(records) == RECORDS
            for p in range(PARTITIONS):
                mine = [r for r in records if r.partition == p]
                assert [r.offset for r in mine] == list(range(len(produced[p])))
                assert [r.value for r in mine] == produced[p]
            assert consumer.positions() == {(TOPIC, p): len(produced[p]) for p in produced}
            assert await consumer.poll(timeout=0.3) == [], "no record twice"

    asyncio.run(main())


def test_seeks_pauses_and_offset_lookups(cluster, produced) -> None:
    tp0, tp1 = (TOPIC, 0), (TOPIC, 1)

    async def main() -> None:
        async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "latest"})) as consumer:
            await consumer.assign([tp0, tp1])
            assert await consumer.position(tp0) == len(produced[0]), "latest = the end"
            consumer.seek(tp0, 10)
            consumer.pause([tp1])
            consumer.seek(tp1, 0)
            assert consumer.paused() == [tp1]
            first = await consumer.poll(timeout=10)
            assert (first[0].partition, first[0].offset) == (0, 10)
            assert all(r.partition == 0 for r in first), "a paused partition hands nothing out"
            consumer.resume([tp1])
            consumer.seek_to_beginning([tp0])
            seen = {r.partition for r in await poll_until(consumer, 1)}
            assert seen <= {0, 1}
            assert await consumer.position(tp0) >= 0
            assert await consumer.end_offsets([tp0, tp1]) == {
                tp0: len(produced[0]),
                tp1: len(produced[1]),
            }
            assert await consumer.beginning_offsets([tp0]) == {tp0: 0}
            found = await consumer.offsets_for_times({tp0: BASE_TS + 100})
            assert found[tp0] is not None and found[tp0].offset == 50
            with pytest.raises(ValueError, match="the target time for"):
                await consumer.offsets_for_times({tp0: -5})
            with pytest.raises(KafkaError, match=r"needs a group\.id"):
                consumer.subscribe([TOPIC])

    asyncio.run(main())


def test_no_position_with_reset_none_is_an_error(cluster, produced) -> None:
    async def main() -> None:
        async with AsyncConsumer(config(cluster, **{"auto.offset.reset": "none"})) as consumer:
            await consumer.assign([(TOPIC, 0)])
            with pytest.raises(OffsetOutOfRangeError, match="seek"):
                await consumer.poll(timeout=1)
            consumer.seek((TOPIC, 0), len(produced[0]) - 1)
            (last,) = await consumer.poll(timeout=10)
            assert last.value == produced[0][-1]

    asyncio.run(main())


def test_two_async_members_share_the_topic_commit_and_hand_over(cluster, produced) -> None:
    events: list[tuple[str, str, list]] = []

    class Listener(ConsumerRebalanceListener):
        def __init__(self, name: str, consumer: AsyncConsumer) -> None:
            self.name, self.consumer = name, consumer

        async def on_partitions_assigned(self, partitions: list) -> None:
            events.append((self.name, "assigned", partitions))

        async def on_partitions_revoked(self, partitions: list) -> None:
            await self.consumer.commit()  # awaited inside poll(), before the hand-over
            events.append((self.name, "revoked", partitions))

    async def main() -> None:
        settings = config(cluster, **{"group.id": "async-group", "enable.auto.commit": False})
        seen: dict[str, list] = {"a": [], "b": []}
        async with AsyncConsumer(settings) as a, AsyncConsumer(settings) as b:
            a.subscribe([TOPIC], listener=Listener("a", a))
            while len(seen["a"]) < 100:
                seen["a"] += await a.poll(timeout=1)
            b.subscribe([TOPIC], listener=Listener("b", b))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30

            def settled() -> bool:
                # `a` may read every record before `b` joins: wait for the hand-over as well.
                shared = len(a.assignment()) == len(b.assignment()) == 1
                return shared and len(seen["a"]) + len(seen["b"]) >= RECORDS

            while not settled() and loop.time() < deadline:
                seen["a"] += await a.poll(timeout=0.05)
                seen["b"] += await b.poll(timeout=0.05)
            assert len(a.assignment()) == len(b.assignment()) == 1, (a.assignment(), b.assignment())
            assert {a.assignment()[0][1], b.assignment()[0][1]} == {0, 1}
            assert a.subscription() == b.subscription() == [TOPIC]
            await a.commit()
            await b.commit()
            every = [(r.partition, r.offset) for r in seen["a"] + seen["b"]]
            assert len(every) == len(set(every)) == RECORDS  # each record once, by one member
            committed = await a.committed([(TOPIC, 0), (TOPIC, 1)])
            assert {tp: at.offset for tp, at in committed.items()} == {
                (TOPIC, p): len(produced[p]) for p in range(PARTITIONS)
            }
            # close() leaves the group, as the sync Consumer's does: b gets a's partition long
            # before the coordinator's 45 s session timeout would have taken it from a.
            await a.close()
            deadline = loop.time() + 15
            while len(b.assignment()) < PARTITIONS:
                assert loop.time() < deadline, f"b owns {b.assignment()} after a closed"
                assert await b.poll(timeout=0.2) == [], "b starts at a's committed offsets"
        # The revoked partition was committed in the coroutine listener before b got it.
        revoked = [e for e in events if e[1] == "revoked"]
        assert revoked and revoked[0][0] == "a"
        async with AsyncConsumer(settings) as late:
            late.subscribe([TOPIC])
            # Joining takes some heartbeats: every poll meanwhile and after returns nothing, for
            # the member starts at the committed offsets, the end.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while sorted(late.assignment()) != [(TOPIC, 0), (TOPIC, 1)]:
                assert loop.time() < deadline, f"the late member owns {late.assignment()}"
                assert await late.poll(timeout=0.2) == []
            ends = {(TOPIC, p): len(produced[p]) for p in range(PARTITIONS)}
            assert {tp: await late.position(tp) for tp in ends} == ends
            assert await late.poll(timeout=1) == []

    asyncio.run(main())


def test_assign_with_a_group_id_auto_commits_its_positions_at_close(cluster, produced) -> None:
    """As Kafka's consumer: assign() with a group.id and enable.auto.commit (the default)
    commits the positions, so a restarted consumer goes on where this one stopped; sync and
    async alike."""
    tp = (TOPIC, 0)

    async def main() -> None:
        async with AsyncConsumer(config(cluster, **{"group.id": "assigned-async"})) as consumer:
            await consumer.assign([tp])
            await poll_until(consumer, len(produced[0]))

    asyncio.run(main())
    with Consumer(config(cluster, **{"group.id": "assigned-sync"})) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 100)
        assert len(consumer.poll(timeout=10)) > 0
        position = consumer.position(tp)
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        async_offsets = admin.list_consumer_group_offsets("assigned-async", [tp])
        sync_offsets = admin.list_consumer_group_offsets("assigned-sync", [tp])
    assert async_offsets[tp].offset == len(produced[0])
    assert sync_offsets[tp].offset == position

"""Produce, Fetch and ListOffsets against real logs in a temp dir, driven by metadata images."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image
from loop_turns import turns

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch, decode_batches
from samsa.metadata.image import BrokerRegistration, MetadataImage, PartitionState
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch, read_once
from samsa.services.broker.requests.list_offsets import list_offsets
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2 as b
from samsa.v1 import records_pb2

TOPIC_ID = b"\x07" * 16


def image(
    leader: int = 1, epoch: int = 0, topic: str = "t", topic_id: bytes = TOPIC_ID
) -> MetadataImage:
    return single_broker_image({topic: (topic_id, led_partitions(2, leader, epoch))})


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    with hosting(tmp_path, image()) as hosted:
        yield hosted


def produce_request(partition: int, records: bytes = b"", typed=(), topic: str = "t", acks=1):
    data = b.ProduceRequest.PartitionData(partition=partition, records=records, typed_records=typed)
    return b.ProduceRequest(
        acks=acks, topics=[b.ProduceRequest.TopicData(name=topic, partitions=[data])]
    )


def fetch_request(partition: int, offset: int, **options) -> b.FetchRequest:
    return b.FetchRequest(
        topics=[
            b.FetchRequest.TopicData(
                name="t",
                partitions=[b.FetchRequest.PartitionData(partition=partition, fetch_offset=offset)],
            )
        ],
        **options,
    )


def test_produced_batches_get_dense_offsets_and_read_back_as_stored(host):
    for expected_base in (0, 3):
        answer, waits = produce(host, produce_request(0, build_batch([b"a", b"b", b"c"])), 5)
        result = answer.topics[0].partitions[0]
        assert (result.error_code, result.base_offset) == (0, expected_base)
        assert waits == [], "one replica: committed at once"
    response, size, _ = read_once(host, fetch_request(0, 0))
    partition = response.topics[0].partitions[0]
    assert partition.high_watermark == 6 and size == len(partition.records)
    values = [v for batch in decode_batches(partition.records) for v in batch.values]
    assert values == [b"a", b"b", b"c"] * 2


def test_typed_records_are_encoded_by_the_broker(host):
    typed = [records_pb2.Record(key=b"k", value=b"v", timestamp_ms=42)]
    answer, _ = produce(host, produce_request(1, typed=typed), 5)
    assert answer.topics[0].partitions[0].error_code == 0
    response, _, _ = read_once(host, fetch_request(1, 0, decode_records=True))
    record = response.topics[0].partitions[0].decoded_records[0]
    assert (record.offset, record.key, record.value, record.timestamp_ms) == (0, b"k", b"v", 42)


def test_typed_records_without_a_timestamp_get_the_brokers_clock(host):
    """records.proto: a typed record's timestamp_ms of 0 (unset) or below means "now"."""
    typed = [records_pb2.Record(value=b"a"), records_pb2.Record(value=b"b", timestamp_ms=-1)]
    typed.append(records_pb2.Record(value=b"c", timestamp_ms=7))
    answer, _ = produce(host, produce_request(1, typed=typed), 1_700_000_000_000)
    assert answer.topics[0].partitions[0].error_code == 0
    response, _, _ = read_once(host, fetch_request(1, 0, decode_records=True))
    stamps = [r.timestamp_ms for r in response.topics[0].partitions[0].decoded_records]
    assert stamps == [1_700_000_000_000, 1_700_000_000_000, 7]


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (produce_request(0, b"garbage"), ErrorCode.CORRUPT_MESSAGE),
        (produce_request(9, build_batch([b"x"])), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (produce_request(0, build_batch([b"x"]), topic="u"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (produce_request(0, build_batch([b"x"]), acks=2), ErrorCode.INVALID_REQUIRED_ACKS),
        (produce_request(0, b""), ErrorCode.INVALID_REQUEST),
    ],
)
def test_refused_produces_say_why_and_store_nothing(host, request_, code):
    answer, waits = produce(host, request_, 5)
    result = answer.topics[0].partitions[0]
    assert result.error_code == code and result.error_message
    assert waits == [] and host.get("t", 0).log.log_end_offset == 0


def test_a_partition_led_elsewhere_answers_not_leader_with_the_leader(host):
    moved = image(leader=2, epoch=1)
    moved = MetadataImage(**{**moved.__dict__, "brokers": {}})
    # broker 1 is no longer a replica: the partition stops here; metadata names broker 2
    host.apply(moved, partition_changes(host.image, moved, 1), now_ms=0)
    answer, _ = produce(host, produce_request(0, build_batch([b"x"])), 5)
    result = answer.topics[0].partitions[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (result.current_leader.leader_id, result.current_leader.leader_epoch) == (2, 1)


def test_fetch_out_of_range_and_stale_leader_epoch(host):
    response, _, _ = read_once(host, fetch_request(0, 5))
    assert response.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    request = fetch_request(0, 0)
    request.topics[0].partitions[0].current_leader_epoch = 7
    response, _, _ = read_once(host, request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_waiting_fetch_answers_as_soon_as_a_produce_lands(host):
    async def scenario() -> int:
        # The fetch may wait 30 s; being answered within 10 s proves the append woke it.
        waiting = asyncio.create_task(fetch(host, fetch_request(0, 0, max_wait_ms=30_000)))
        await turns()
        assert not waiting.done(), "nothing to read yet: the fetch must wait"
        produce(host, produce_request(0, build_batch([b"late"])), 5)
        host.get("t", 0).notify_appended()
        response = await asyncio.wait_for(waiting, 10)
        return len(response.topics[0].partitions[0].records)

    assert asyncio.run(scenario()) > 0


def test_list_offsets_earliest_latest_and_by_time(host):
    produce(host, produce_request(0, build_batch([b"a", b"b"], timestamps=[100, 200])), 5)
    request = b.ListOffsetsRequest(
        topics=[
            b.ListOffsetsRequest.TopicData(
                name="t",
                partitions=[
                    b.ListOffsetsRequest.PartitionData(
                        partition=0, offset_spec=spec, timestamp_ms=ts
                    )
                    for spec, ts in (
                        (b.OFFSET_SPEC_EARLIEST, 0),
                        (b.OFFSET_SPEC_LATEST, 0),
                        (b.OFFSET_SPEC_TIMESTAMP, 150),
                        (b.OFFSET_SPEC_TIMESTAMP, 999),
                    )
                ],
            )
        ]
    )
    offsets = [p.offset for p in list_offsets(host, request).topics[0].partitions]
    assert offsets == [0, 2, 1, -1]


def test_a_deleted_topic_log_is_removed_and_a_namesake_starts_empty(host, tmp_path):
    produce(host, produce_request(0, build_batch([b"old"])), 5)
    recreated = image(topic_id=b"\x08" * 16)
    host.apply(recreated, partition_changes(host.image, recreated, 1), now_ms=0)
    assert host.get("t", 0).log.log_end_offset == 0
    assert (tmp_path / "t-0" / "topic_id").read_bytes() == b"\x08" * 16


def test_the_maintenance_loop_applies_retention_to_hosted_partitions(tmp_path):
    from dataclasses import replace

    from samsa.metadata.image import TOPIC_RESOURCE
    from samsa.services.broker.maintenance import run_maintenance

    partition_host = PartitionHost(tmp_path, broker_id=1)
    configs = {"retention.ms": "1", "segment.bytes": "1024", "max.message.bytes": "1024"}
    new = replace(image(), configs={(TOPIC_RESOURCE, "t"): configs})
    partition_host.apply(new, partition_changes(MetadataImage.empty(), new, 1), now_ms=0)
    for _ in range(10):
        produce(partition_host, produce_request(0, build_batch([b"x" * 600], timestamps=[1])), 5)
    log = partition_host.get("t", 0).log
    assert len(log.segments()) > 5 and log.log_start_offset == 0

    async def one_pass() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(
            run_maintenance(partition_host, stop, retention_interval_s=0, flush_interval_s=0.01)
        )
        await asyncio.sleep(0.2)
        stop.set()
        await task

    asyncio.run(one_pass())
    assert log.log_start_offset == 10, "every committed record was older than retention.ms"
    assert [(s.base_offset, s.size_bytes) for s in log.segments()] == [(10, 0)]
    partition_host.close_all()


def replicated_host(tmp_path: Path, isr: tuple[int, ...]) -> PartitionHost:
    from dataclasses import replace

    from samsa.metadata.image import TOPIC_RESOURCE

    partition_host = PartitionHost(tmp_path, broker_id=1)
    base = image()
    state = PartitionState(0, (1, 2, 3), isr, 1, 0, 0)
    topic = replace(base.topics["t"], partitions={0: state})
    brokers = {i: BrokerRegistration(i, "i", f"h:{i}", "", 0, False) for i in (1, 2, 3)}
    new = replace(
        base,
        topics={"t": topic},
        brokers=brokers,
        configs={(TOPIC_RESOURCE, "t"): {"min.insync.replicas": "2"}},
    )
    partition_host.apply(new, partition_changes(MetadataImage.empty(), new, 1), now_ms=0)
    return partition_host


def follower_fetch(partition_host: PartitionHost, replica: int, offset: int) -> None:
    request = fetch_request(0, offset)
    request.replica_id = replica
    read_once(partition_host, request)


def test_acks_all_is_answered_once_the_isr_has_the_batch(tmp_path):
    from samsa.services.broker.requests.produce_wait import await_replication

    partition_host = replicated_host(tmp_path, isr=(1, 2, 3))
    request = produce_request(0, build_batch([b"a", b"b"]), acks=-1)
    answer, waits = produce(partition_host, request, 5)
    assert len(waits) == 1 and partition_host.get("t", 0).high_watermark == 0

    async def scenario() -> None:
        waiting = asyncio.create_task(await_replication(waits, timeout_s=10))
        await turns()
        follower_fetch(partition_host, 2, 2)
        await turns()
        assert not waiting.done(), "one follower of two: not yet replicated to the ISR"
        follower_fetch(partition_host, 3, 2)
        await asyncio.wait_for(waiting, 5)

    asyncio.run(scenario())
    assert answer.topics[0].partitions[0].error_code == 0
    assert partition_host.get("t", 0).high_watermark == 2
    partition_host.close_all()


def test_acks_all_is_refused_below_min_isr_and_times_out_without_followers(tmp_path):
    from samsa.services.broker.requests.produce_wait import await_replication

    small = replicated_host(tmp_path / "small", isr=(1,))
    answer, waits = produce(small, produce_request(0, build_batch([b"a"]), acks=-1), 5)
    result = answer.topics[0].partitions[0]
    assert result.error_code == ErrorCode.NOT_ENOUGH_REPLICAS and waits == []
    assert small.get("t", 0).log.log_end_offset == 0, "refused before anything was written"
    small.close_all()

    silent = replicated_host(tmp_path / "silent", isr=(1, 2))
    answer, waits = produce(silent, produce_request(0, build_batch([b"a"]), acks=-1), 5)
    asyncio.run(await_replication(waits, timeout_s=0.1))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    silent.close_all()


def test_a_follower_with_a_diverged_log_is_told_where_to_truncate(tmp_path):
    partition_host = replicated_host(tmp_path, isr=(1, 2, 3))
    produce(partition_host, produce_request(0, build_batch([b"a", b"b", b"c"])), 5)
    request = fetch_request(0, 7)
    request.replica_id = 2
    request.topics[0].partitions[0].last_fetched_epoch = 0
    response, _, _ = read_once(partition_host, request)
    diverging = response.topics[0].partitions[0].diverging_epoch
    assert (diverging.leader_epoch, diverging.end_offset) == (0, 3)
    partition_host.close_all()


@pytest.mark.parametrize("in_session", [False, True], ids=["sessionless", "in-session"])
def test_a_diverged_follower_is_answered_at_once_not_after_max_wait(tmp_path, in_session):
    """After a leader change the new leader's first answer to a follower is often a diverging
    epoch: parked until max_wait_ms, it held acks=all writes for the whole wait."""
    from samsa.services.broker.requests.fetch_session import FetchSessionCache

    partition_host = replicated_host(tmp_path, isr=(1, 2, 3))
    produce(partition_host, produce_request(0, build_batch([b"a", b"b", b"c"])), 5)
    request = fetch_request(0, 7, max_wait_ms=60_000, min_bytes=1)
    request.replica_id = 2
    request.topics[0].partitions[0].last_fetched_epoch = 0
    sessions = None
    if in_session:
        sessions = FetchSessionCache()
        request.session_id, request.session_epoch = 0, 0

    async def answer() -> b.FetchResponse:
        return await asyncio.wait_for(fetch(partition_host, request, sessions), 10)

    response = asyncio.run(answer())  # parked, it would time out here
    diverging = response.topics[0].partitions[0].diverging_epoch
    assert (diverging.leader_epoch, diverging.end_offset) == (0, 3)
    partition_host.close_all()


def test_acks_all_whose_leadership_moved_names_the_new_leader(tmp_path):
    """KIP-951: the producer retries at the new leader at once, with no metadata refresh."""
    from dataclasses import replace

    from samsa.services.broker.requests.produce_wait import await_replication

    partition_host = replicated_host(tmp_path, isr=(1, 2, 3))
    answer, waits = produce(partition_host, produce_request(0, build_batch([b"a"]), acks=-1), 5)
    old = partition_host.image
    topic = old.topics["t"]
    moved = replace(topic, partitions={0: PartitionState(0, (1, 2, 3), (1, 2, 3), 2, 1, 1)})
    new = replace(old, topics={"t": moved})

    async def scenario() -> None:
        waiting = asyncio.create_task(await_replication(waits, timeout_s=10))
        await asyncio.sleep(0)  # one turn: the wait runs until it parks on the partition
        assert not waiting.done()
        partition_host.apply(new, partition_changes(old, new, 1), now_ms=0)
        await asyncio.wait_for(waiting, 5)

    asyncio.run(scenario())
    result = answer.topics[0].partitions[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (result.current_leader.leader_id, result.current_leader.leader_epoch) == (2, 1)
    partition_host.close_all()


def test_a_changed_flush_policy_applies_without_a_restart(tmp_path):
    """AlterConfigs of flush.messages reaches the log's flush policy, not only its appends."""
    from dataclasses import replace

    from samsa.metadata.image import TOPIC_RESOURCE

    with hosting(tmp_path, image()) as partition_host:
        log = partition_host.get("t", 0).log
        produce(partition_host, produce_request(0, build_batch([b"a"])), 5)
        assert log.recovery_point == 0, "flush.messages defaults to never"
        before = partition_host.image
        flushed = replace(before, configs={(TOPIC_RESOURCE, "t"): {"flush.messages": "1"}})
        partition_host.apply(flushed, partition_changes(before, flushed, 1), now_ms=0)
        produce(partition_host, produce_request(0, build_batch([b"b"])), 5)
        assert log.recovery_point == log.log_end_offset == 2, "flushed at once"


def test_a_leader_just_elected_answers_offset_not_available_until_its_high_watermark_is(tmp_path):
    """Its high watermark is still the one it had as a follower, below the end the previous
    leader answered: ListOffsets LATEST would go backwards (Kafka: OFFSET_NOT_AVAILABLE)."""
    from dataclasses import replace

    partition_host = replicated_host(tmp_path, isr=(1, 2, 3))
    produce(partition_host, produce_request(0, build_batch([b"a", b"b"])), 5)
    old = partition_host.image
    state = replace(old.topics["t"].partitions[0], leader_epoch=1, partition_epoch=1)
    topic = replace(old.topics["t"], partitions={0: state})
    new = replace(old, topics={"t": topic}, end_offset=old.end_offset + 1)
    partition_host.apply(new, partition_changes(old, new, 1), now_ms=1)

    def listed(spec: int) -> b.ListOffsetsResponse.PartitionResponse:
        wanted = b.ListOffsetsRequest.PartitionData(partition=0, offset_spec=spec)
        topics = [b.ListOffsetsRequest.TopicData(name="t", partitions=[wanted])]
        return (
            list_offsets(partition_host, b.ListOffsetsRequest(topics=topics))
            .topics[0]
            .partitions[0]
        )

    assert partition_host.get("t", 0).high_watermark == 0
    latest = listed(b.OFFSET_SPEC_LATEST)
    assert latest.error_code == ErrorCode.OFFSET_NOT_AVAILABLE and "retry" in latest.error_message
    assert listed(b.OFFSET_SPEC_MAX_TIMESTAMP).error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert listed(b.OFFSET_SPEC_EARLIEST).error_code == ErrorCode.NONE
    follower = b.ListOffsetsRequest(
        replica_id=2,
        topics=[
            b.ListOffsetsRequest.TopicData(
                name="t",
                partitions=[
                    b.ListOffsetsRequest.PartitionData(
                        partition=0, offset_spec=b.OFFSET_SPEC_LATEST
                    )
                ],
            )
        ],
    )
    by_follower = list_offsets(partition_host, follower).topics[0].partitions[0]
    assert (by_follower.error_code, by_follower.offset) == (0, 2), "a replica gets the log end"
    follower_fetch(partition_host, 2, 2)
    follower_fetch(partition_host, 3, 2)
    assert partition_host.get("t", 0).high_watermark == 2
    assert (listed(b.OFFSET_SPEC_LATEST).error_code, listed(b.OFFSET_SPEC_LATEST).offset) == (0, 2)
    partition_host.close_all()

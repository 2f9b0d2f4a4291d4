"""The broker service as real processes, spoken to with generated code only (the polyglot path).

One controller and two brokers. What would break: typed records that do not round-trip, a bad
request that changes stored data or gets an unclear answer, data that does not survive a
kill -9 of its broker, a service without health or reflection.
"""

from __future__ import annotations

import signal
import struct

import grpc
import pytest
from cluster_helpers import admin_write, local_cluster, wait_until
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from samsa.client import Consumer
from samsa.common.errors import CorruptRecordError
from samsa.common.record.codec import build_batch
from samsa.common.record.header import CRC_POSITION, HEADER_BYTES, compute_crc, read_header
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.broker.partition_host import partition_dir_name
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2, records_pb2

pytestmark = pytest.mark.timeout(240)
NONE, CORRUPT, UNKNOWN_TOPIC, NOT_LEADER, INVALID_CONFIG = 0, 2, 3, 6, 40


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("brokers"), controllers=1, brokers=2) as running:
        answer = admin_write(
            running.spec,
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreateTopicsRequest.Topic(
                        name="events", num_partitions=2, replication_factor=1
                    )
                ]
            ),
        )
        assert answer.topics[0].error_code == NONE, answer.topics[0].error_message
        yield running


def leaders(cluster, topic: str = "events") -> dict[int, int]:
    """partition -> leader broker id, once every partition has a leader on its broker."""
    answer = admin_write(
        cluster.spec, "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[topic])
    )
    return {p.partition: p.leader for p in answer.topics[0].partitions}


def served_leader(cluster, partition: int, topic: str = "events") -> int | None:
    """The partition's leader once that broker serves it, else None. The controller names the
    leader as it commits the topic; the broker takes the leadership up when its metadata log
    brings it, a moment later, and answers NOT_LEADER or UNKNOWN_TOPIC_OR_PARTITION until then."""
    leader = leaders(cluster, topic).get(partition, -1)
    if leader <= 0 or latest_offset_or_none(cluster, leader, partition, topic) is None:
        return None
    return leader


def broker_stub(cluster, broker_id: int) -> broker_pb2_grpc.BrokerServiceStub:
    endpoint = next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)
    return broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(endpoint))


def produce(cluster, broker_id: int, partition: int, *, records=None, typed=None, topic="events"):
    data = broker_pb2.ProduceRequest.PartitionData(partition=partition)
    if records is not None:
        data.records = records
    for record in typed or []:
        data.typed_records.append(record)
    request = broker_pb2.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topics=[broker_pb2.ProduceRequest.TopicData(name=topic, partitions=[data])],
    )
    answer = broker_stub(cluster, broker_id).Produce(request, timeout=10)
    return answer.topics[0].partitions[0]


def latest_offset(cluster, broker_id: int, partition: int) -> int:
    offset = latest_offset_or_none(cluster, broker_id, partition)
    assert offset is not None, f"broker {broker_id} cannot list offsets of events-{partition}"
    return offset


def latest_offset_or_none(
    cluster, broker_id: int, partition: int, topic: str = "events"
) -> int | None:
    request = broker_pb2.ListOffsetsRequest(
        topics=[
            broker_pb2.ListOffsetsRequest.TopicData(
                name=topic,
                partitions=[
                    broker_pb2.ListOffsetsRequest.PartitionData(
                        partition=partition, offset_spec=broker_pb2.OFFSET_SPEC_LATEST
                    )
                ],
            )
        ]
    )
    answer = broker_stub(cluster, broker_id).ListOffsets(request, timeout=10)
    result = answer.topics[0].partitions[0]
    return result.offset if result.error_code == NONE else None


def fetch_decoded(cluster, broker_id: int, partition: int, offset: int, topic: str = "events"):
    request = broker_pb2.FetchRequest(
        max_wait_ms=100,
        max_bytes=1 << 20,
        decode_records=True,
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name=topic,
                partitions=[
                    broker_pb2.FetchRequest.PartitionData(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    return broker_stub(cluster, broker_id).Fetch(request, timeout=10).topics[0].partitions[0]


def test_typed_records_round_trip_through_generated_code_alone(cluster) -> None:
    leader = wait_until("partition 0 served by its leader", lambda: served_leader(cluster, 0))
    start = latest_offset(cluster, leader, 0)
    typed = [
        records_pb2.Record(
            key=f"k{n}".encode(),
            value=f"v{n}".encode(),
            timestamp_ms=1_700_000_000_000 + n,
            headers=[records_pb2.RecordHeader(key="trace", value=b"t%d" % n)],
        )
        for n in range(5)
    ]
    answer = produce(cluster, leader, 0, typed=typed)
    assert answer.error_code == NONE, answer.error_message
    assert answer.base_offset == start
    fetched = fetch_decoded(cluster, leader, 0, start)
    assert fetched.error_code == NONE, fetched.error_message
    got = [
        (r.offset, r.key, r.value, r.timestamp_ms, r.headers[0].value)
        for r in fetched.decoded_records
    ]
    assert got == [
        (start + n, f"k{n}".encode(), f"v{n}".encode(), 1_700_000_000_000 + n, b"t%d" % n)
        for n in range(5)
    ]
    assert fetched.high_watermark == start + 5


def test_bad_input_gets_a_clear_error_and_changes_nothing(cluster) -> None:
    leader = wait_until("partition 0 served by its leader", lambda: served_leader(cluster, 0))
    before = latest_offset(cluster, leader, 0)
    good = build_batch([b"x"])

    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    answer = produce(cluster, leader, 0, records=bytes(corrupt))
    assert answer.error_code == CORRUPT and answer.error_message

    answer = produce(cluster, leader, 0, records=b"this is not a record batch at all")
    assert answer.error_code != NONE and answer.error_message

    answer = produce(cluster, leader, 0, records=good, topic="no-such-topic")
    assert answer.error_code == UNKNOWN_TOPIC

    answer = produce(cluster, leader, 99, records=good)
    assert answer.error_code == UNKNOWN_TOPIC

    other = next(b.broker_id for b in cluster.spec.brokers if b.broker_id != leader)
    # The other broker learns of the topic from its own metadata log, maybe after the leader.
    answer = wait_until(
        "the other broker to know events-0",
        lambda: (a := produce(cluster, other, 0, records=good)).error_code != UNKNOWN_TOPIC and a,
    )
    assert answer.error_code == NOT_LEADER
    assert answer.current_leader.leader_id == leader

    with pytest.raises(grpc.RpcError) as oversize:
        produce(cluster, leader, 0, records=b"\x00" * (100 * 1024 * 1024))
    assert oversize.value.code() in (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INVALID_ARGUMENT,
    )

    created = admin_write(
        cluster.spec,
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreateTopicsRequest.Topic(
                    name="bad-config", num_partitions=1, configs={"retention.ms": "soon"}
                )
            ]
        ),
    )
    assert created.topics[0].error_code == INVALID_CONFIG
    assert "retention.ms" in created.topics[0].error_message

    assert latest_offset(cluster, leader, 0) == before, "a refused request changed the log"


def test_data_survives_a_kill_9_of_its_broker(cluster) -> None:
    leader = wait_until("partition 1 served by its leader", lambda: served_leader(cluster, 1))
    start = latest_offset(cluster, leader, 1)
    values = [b"durable-%d" % n for n in range(100)]
    answer = produce(cluster, leader, 1, records=build_batch(values))
    assert answer.error_code == NONE, answer.error_message
    cluster.kill(f"broker-{leader}")
    cluster.start(f"broker-{leader}")
    wait_until(
        "the restarted broker to lead partition 1 again",
        lambda: (
            leaders(cluster).get(1) == leader
            and (latest_offset_or_none(cluster, leader, 1) or 0) >= start + 100
        ),
        timeout_s=60,
    )
    fetched = fetch_decoded(cluster, leader, 1, start)
    assert [r.value for r in fetched.decoded_records][:100] == values


@pytest.mark.parametrize("kind", ["controller", "broker"])
def test_every_service_serves_health_and_reflection(cluster, kind: str) -> None:
    endpoint = (
        cluster.spec.controllers[0] if kind == "controller" else cluster.spec.brokers[0]
    ).endpoint
    channel = grpc.insecure_channel(endpoint)
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
    )
    names = {s.name for answer in answers for s in answer.list_services_response.service}
    expected = "samsa.v1.ControllerService" if kind == "controller" else "samsa.v1.BrokerService"
    assert expected in names


def test_produce_stream_answers_each_request_by_correlation_id(cluster) -> None:
    leader = wait_until("partition 0 served by its leader", lambda: served_leader(cluster, 0))
    start = latest_offset(cluster, leader, 0)
    requests = [
        broker_pb2.ProduceStreamRequest(
            correlation_id=100 + n,
            request=broker_pb2.ProduceRequest(
                acks=1,
                topics=[
                    broker_pb2.ProduceRequest.TopicData(
                        name="events" if n != 1 else "no-such-topic",
                        partitions=[
                            broker_pb2.ProduceRequest.PartitionData(
                                partition=0, records=build_batch([b"s-%d" % n])
                            )
                        ],
                    )
                ],
            ),
        )
        for n in range(3)
    ]
    answers = list(broker_stub(cluster, leader).ProduceStream(iter(requests), timeout=30))
    by_id = {a.correlation_id: a.response.topics[0].partitions[0] for a in answers}
    assert set(by_id) == {100, 101, 102}
    assert by_id[101].error_code == UNKNOWN_TOPIC
    assert sorted([by_id[100].base_offset, by_id[102].base_offset]) == [start, start + 1]


def poisoned_batch(values: list[bytes], **placement: int) -> bytes:
    """Issue 9, hole 1: a valid batch whose first offset delta is 2^31-1, CRC re-signed."""
    raw = bytearray(build_batch(values, **placement))
    struct.pack_into("<i", raw, HEADER_BYTES, 2**31 - 1)
    struct.pack_into("<I", raw, CRC_POSITION, compute_crc(raw, 0, len(raw)))
    return bytes(raw)


def test_a_batch_no_reader_can_decode_is_refused_and_a_stored_one_is_reported(cluster) -> None:
    """The leader refuses the poisoned batch (CORRUPT_MESSAGE, nothing stored). A poisoned batch
    already on disk (written by an older version: injected while the broker is stopped) answers
    CORRUPT_MESSAGE for its partition, never UNKNOWN; the records around it stay readable, by
    generated code and by the SDK consumer, which names the offsets to seek past."""
    admin_write(
        cluster.spec,
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[controller_pb2.CreateTopicsRequest.Topic(name="poison", num_partitions=1)]
        ),
    )
    leader = wait_until(
        "poison-0 served by its leader", lambda: served_leader(cluster, 0, "poison")
    )
    before = produce(cluster, leader, 0, records=build_batch([b"before"]), topic="poison")
    assert before.error_code == NONE, before.error_message
    refused = produce(cluster, leader, 0, records=poisoned_batch([b"x", b"y"]), topic="poison")
    assert refused.error_code == CORRUPT
    assert "offset_deltas must strictly increase" in refused.error_message

    cluster.kill(f"broker-{leader}", signal.SIGTERM)
    log_dir = cluster.data_dir / f"broker-{leader}" / partition_dir_name("poison", 0)
    stored = Log.open(log_dir, LogConfig(), now_ms=0)
    try:
        epoch = read_header(stored.read(0, 1 << 20).records).partition_leader_epoch
        placed = {"base_offset": 1, "partition_leader_epoch": epoch}
        stored.append_as_follower(poisoned_batch([b"x", b"y"], **placed), now_ms=0)
        placed["base_offset"] = 3
        stored.append_as_follower(build_batch([b"after"], **placed), now_ms=0)
    finally:
        stored.close()
    cluster.start(f"broker-{leader}")
    wait_until(
        "the restarted broker to serve poison-0 up to offset 4",
        lambda: (
            leaders(cluster, "poison").get(0) == leader
            and fetch_decoded(cluster, leader, 0, 0, "poison").high_watermark == 4
        ),
        timeout_s=60,
    )
    first = fetch_decoded(cluster, leader, 0, 0, "poison")
    assert first.error_code == NONE, first.error_message
    assert [r.value for r in first.decoded_records] == [b"before"]
    assert first.next_fetch_offset == 1  # stops before the poisoned batch
    bad = fetch_decoded(cluster, leader, 0, 1, "poison")
    assert bad.error_code == CORRUPT
    assert "offset 1 cannot be decoded" in bad.error_message
    assert [r.value for r in fetch_decoded(cluster, leader, 0, 3, "poison").decoded_records] == [
        b"after"
    ]

    with Consumer(
        {"bootstrap.servers": cluster.spec.bootstrap_servers, "auto.offset.reset": "earliest"}
    ) as consumer:
        consumer.assign([("poison", 0)])
        got = wait_until("the record before the poisoned batch", lambda: consumer.poll(1))
        assert [r.value for r in got] == [b"before"]
        with pytest.raises(CorruptRecordError, match="seek to 3 to skip it"):
            wait_until("the poisoned batch", lambda: consumer.poll(1))
        consumer.seek(("poison", 0), 3)
        assert [r.value for r in wait_until("the rest", lambda: consumer.poll(1))] == [b"after"]


def test_a_topic_with_compression_type_zstd_stores_zstd_whatever_the_producer_sent(
    cluster,
) -> None:
    answer = admin_write(
        cluster.spec,
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreateTopicsRequest.Topic(
                    name="zstd-topic",
                    num_partitions=1,
                    replication_factor=1,
                    configs={"compression.type": "zstd"},
                )
            ]
        ),
    )
    assert answer.topics[0].error_code == NONE, answer.topics[0].error_message
    leader = wait_until(
        "zstd-topic led",
        lambda: leaders(cluster, "zstd-topic").get(0, -1) > 0 and leaders(cluster, "zstd-topic")[0],
    )
    values = [b"same bytes, compressible " * 8 for _ in range(20)]
    sent = build_batch(values)  # uncompressed, as a producer without compression sends
    written = wait_until(
        "the leader to accept the write",
        lambda: (
            (r := produce(cluster, leader, 0, records=sent, topic="zstd-topic")).error_code == NONE
            and r
        ),
    )
    request = broker_pb2.FetchRequest(
        max_wait_ms=100,
        max_bytes=1 << 20,
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name="zstd-topic",
                partitions=[
                    broker_pb2.FetchRequest.PartitionData(
                        partition=0, fetch_offset=written.base_offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    stored = broker_stub(cluster, leader).Fetch(request, timeout=10).topics[0].partitions[0]
    assert read_header(stored.records).compression == 4, "stored as zstd, not as sent"
    assert len(stored.records) < len(sent) / 4
    fetched = fetch_decoded(cluster, leader, 0, written.base_offset, topic="zstd-topic")
    assert [r.value for r in fetched.decoded_records] == values

"""Goal: every decoder of untrusted bytes answers with data or its typed error, nothing else —
no IndexError, struct.error, KeyError, MemoryError, hang — and a refused input changes nothing.

Decoders and the errors they document:
- record batches (`codec.decode_batch/decode_batches`, `header.read_header/check_batch/
  batch_size_at`): a SamsaError subclass;
- a metadata batch off the wire (`MetadataRecordBatch.FromString` then `replay.replay`):
  protobuf's DecodeError, then a MetadataReplayError; a refused batch leaves the image as it was;
- a snapshot (`MetadataSnapshot.FromString` then `snapshot.from_snapshot`): DecodeError, then
  InvalidSnapshotError;
- the log recovery scan (`recovery.SegmentScan`): total — it records an error and a valid prefix,
  the same whatever the chunk size it is fed in, and never raises.

Method: hypothesis draws random bytes and mutations of valid inputs (tests/fuzz/fuzz_inputs.py:
bit flips, truncations, splices, absurd integers written over fields, dropped and repeated
ranges); record batches are also mutated and then re-signed (a fresh CRC) so that the checks
behind the CRC see the damage; metadata batches are also re-anchored (base offset and previous
hash set to the image's) so that replay reaches the records. Example counts come from the
profile in tests/conftest.py (derandomized under CI); SAMSA_SLOW=1 runs a longer sibling.
"""

from __future__ import annotations

import contextlib

import crc32c
import pytest
from fuzz_inputs import mutated, random_or_mutated
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.common.errors import SamsaError
from samsa.common.record import header
from samsa.common.record.codec import build_batch, decode_batch, decode_batches
from samsa.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import MetadataReplayError, replay
from samsa.metadata.snapshot import InvalidSnapshotError, from_snapshot, to_snapshot
from samsa.services.broker.log.recovery import SegmentScan
from samsa.v1 import metadata_pb2 as m

SLOW = settings(max_examples=20_000, suppress_health_check=list(HealthCheck))


# --- record batches ----------------------------------------------------------------------------

VALID_BATCHES = [
    build_batch([b"a"]),
    build_batch([b"v%d" % n for n in range(20)], keys=[b"k%d" % n for n in range(20)]),
    build_batch([b"x" * 200] * 5, compression=header.COMPRESSION_ZSTD, base_offset=7),
    build_batch([None, b"", b"z"], headers=[[("h", b"1")], [], [("\u00e9", None)]]),
]
SEGMENT = b"".join(
    build_batch([b"s%d" % n], base_offset=n, partition_leader_epoch=n // 2) for n in range(6)
)


def resign(batch: bytes) -> bytes:
    """The batch with its CRC recomputed, when the header is still long enough to hold one."""
    if len(batch) < header.HEADER_BYTES:
        return batch
    data = bytearray(batch)
    crc = crc32c.crc32c(bytes(data[header.CRC_COVERED_FROM :]))
    data[header.CRC_POSITION : header.CRC_POSITION + 4] = crc.to_bytes(4, "little")
    return bytes(data)


BATCH_BYTES = random_or_mutated([*VALID_BATCHES, SEGMENT])
RESIGNED = st.sampled_from(VALID_BATCHES).flatmap(mutated).map(resign)


def check_record_decoders(data: bytes, position: int) -> None:
    for decode in (
        lambda: decode_batch(data, position),
        lambda: decode_batch(data, position, verify_crc=False),
        lambda: decode_batch(bytearray(data), position),
        lambda: decode_batch(memoryview(data), position, verify_crc=False),
        lambda: decode_batches(data),
        lambda: header.read_header(data, position),
        lambda: header.check_batch(data, position, max_batch_bytes=1 << 20),
        lambda: header.batch_size_at(data, position),
    ):
        with contextlib.suppress(SamsaError):
            decode()


@given(data=BATCH_BYTES | RESIGNED, position=st.integers(0, 80))
def test_record_batch_decoders_answer_data_or_a_samsa_error(data: bytes, position: int) -> None:
    check_record_decoders(data, position)


@pytest.mark.slow
@SLOW
@given(data=BATCH_BYTES | RESIGNED, position=st.integers(0, 80))
def test_record_batch_decoders_slow(data: bytes, position: int) -> None:
    check_record_decoders(data, position)


def test_a_resigned_batch_reaches_the_section_checks() -> None:
    """The re-signing works: a flipped records byte is then seen by the section, not the CRC."""
    damaged = bytearray(VALID_BATCHES[1])
    damaged[header.HEADER_BYTES + 3] ^= 0x80  # offset_deltas[0] (int32 LE) becomes negative
    with pytest.raises(SamsaError, match="CRC"):
        decode_batch(bytes(damaged))
    with pytest.raises(SamsaError, match="offset_deltas"):
        decode_batch(resign(bytes(damaged)))


# --- metadata replay and snapshots --------------------------------------------------------------

TOPIC_ID = bytes(range(16))


def base_image() -> MetadataImage:
    """Two brokers (one unfenced), a topic of two partitions, a config and a block of producer
    ids, replayed for real."""
    image = MetadataImage.empty()
    steps = [
        [
            m.MetadataRecord(register_broker=m.RegisterBrokerRecord(broker_id=1, endpoint="a:1")),
            m.MetadataRecord(register_broker=m.RegisterBrokerRecord(broker_id=2, endpoint="b:2")),
        ],
        [m.MetadataRecord(unfence_broker=m.UnfenceBrokerRecord(broker_id=1, broker_epoch=0))],
        [
            m.MetadataRecord(topic=m.TopicRecord(name="t", topic_id=TOPIC_ID)),
            m.MetadataRecord(
                partition=m.PartitionRecord(
                    topic_id=TOPIC_ID, partition=0, replicas=[1, 2], isr=[1], leader=1
                )
            ),
            m.MetadataRecord(
                partition=m.PartitionRecord(topic_id=TOPIC_ID, partition=1, replicas=[2], leader=-1)
            ),
            m.MetadataRecord(
                config=m.ConfigRecord(
                    resource_type=TOPIC_RESOURCE, resource_name="t", name="retention.ms", value="1"
                )
            ),
            m.MetadataRecord(
                producer_ids=m.ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000)
            ),
        ],
    ]
    for records in steps:
        image = replay(image, make_batch(image, records, timestamp_ms=1))
    return image


IMAGE = base_image()
IMAGE_SNAPSHOT = to_snapshot(IMAGE).SerializeToString()

INT32 = st.sampled_from([0, 1, 2, -1, 2**31 - 1, -(2**31)]) | st.integers(-(2**31), 2**31 - 1)
INT64 = st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63)]) | st.integers(-(2**63), 2**63 - 1)
IDS = st.lists(st.sampled_from([1, 2, 3, -1, 0, 2**31 - 1]), max_size=5)
TOPIC_IDS = st.sampled_from([TOPIC_ID, b"", b"\x00" * 16, b"x" * 17]) | st.binary(max_size=17)
NAMES = st.sampled_from(["t", "", "u", "retention.ms"]) | st.text(max_size=8)


def records() -> st.SearchStrategy[m.MetadataRecord]:
    """Well-formed records with absurd field values, one of each kind."""
    broker = st.builds(
        m.RegisterBrokerRecord,
        broker_id=INT32,
        incarnation_id=NAMES,
        endpoint=NAMES,
        rack=NAMES,
        broker_epoch=INT64,
    ).map(lambda r: m.MetadataRecord(register_broker=r))
    pairs = {"broker_id": INT32, "broker_epoch": INT64}
    unregister = st.builds(m.UnregisterBrokerRecord, **pairs).map(
        lambda r: m.MetadataRecord(unregister_broker=r)
    )
    fence = st.builds(m.FenceBrokerRecord, **pairs).map(lambda r: m.MetadataRecord(fence_broker=r))
    unfence = st.builds(m.UnfenceBrokerRecord, **pairs).map(
        lambda r: m.MetadataRecord(unfence_broker=r)
    )
    topic = st.builds(m.TopicRecord, name=NAMES, topic_id=TOPIC_IDS).map(
        lambda r: m.MetadataRecord(topic=r)
    )
    partition = st.builds(
        m.PartitionRecord,
        topic_id=TOPIC_IDS,
        partition=INT32,
        replicas=IDS,
        isr=IDS,
        leader=INT32,
        leader_epoch=INT32,
        partition_epoch=INT32,
    ).map(lambda r: m.MetadataRecord(partition=r))

    @st.composite
    def change(draw: st.DrawFn) -> m.MetadataRecord:
        record = m.PartitionChangeRecord(
            topic_id=draw(TOPIC_IDS), partition=draw(st.sampled_from([0, 1, 2, -1]) | INT32)
        )
        if draw(st.booleans()):
            record.leader = draw(INT32)
        if draw(st.booleans()):
            record.replicas.ids.extend(draw(IDS))
        if draw(st.booleans()):
            record.isr.ids.extend(draw(IDS))
        return m.MetadataRecord(partition_change=record)

    remove = st.builds(m.RemoveTopicRecord, topic_id=TOPIC_IDS).map(
        lambda r: m.MetadataRecord(remove_topic=r)
    )

    @st.composite
    def config(draw: st.DrawFn) -> m.MetadataRecord:
        record = m.ConfigRecord(
            resource_type=draw(st.sampled_from([0, TOPIC_RESOURCE, BROKER_RESOURCE, 99])),
            resource_name=draw(NAMES),
            name=draw(NAMES),
        )
        if draw(st.booleans()):
            record.value = draw(NAMES)
        return m.MetadataRecord(config=record)

    producer_ids = st.builds(
        m.ProducerIdsRecord, broker_id=INT32, broker_epoch=INT64, next_producer_id=INT64
    ).map(lambda r: m.MetadataRecord(producer_ids=r))
    empty = st.just(m.MetadataRecord())
    return st.one_of(
        broker,
        unregister,
        fence,
        unfence,
        topic,
        partition,
        change(),
        remove,
        config(),
        producer_ids,
        empty,
    )


VALID_METADATA_BATCHES = [
    make_batch(IMAGE, [r], timestamp_ms=2).SerializeToString()
    for r in [
        m.MetadataRecord(fence_broker=m.FenceBrokerRecord(broker_id=1, broker_epoch=0)),
        m.MetadataRecord(topic=m.TopicRecord(name="u", topic_id=b"\x01" * 16)),
        m.MetadataRecord(partition_change=m.PartitionChangeRecord(topic_id=TOPIC_ID, leader=2)),
    ]
]


@st.composite
def metadata_batches(draw: st.DrawFn) -> m.MetadataRecordBatch | None:
    """A batch off the wire (random or mutated bytes, None if they do not parse), or a
    well-formed one of absurd records; re-anchored on the image half of the time."""
    if draw(st.booleans()):
        raw = draw(random_or_mutated(VALID_METADATA_BATCHES))
        try:
            batch = m.MetadataRecordBatch.FromString(raw)
        except DecodeError:
            return None
    else:
        batch = m.MetadataRecordBatch(
            base_offset=draw(st.sampled_from([IMAGE.end_offset, 0, -1]) | INT64),
            previous_hash=draw(st.sampled_from([IMAGE.hash, b""])),
            timestamp_ms=draw(INT64),
            records=draw(st.lists(records(), max_size=6)),
        )
    if draw(st.booleans()):
        batch.base_offset = IMAGE.end_offset
        batch.previous_hash = IMAGE.hash
    return batch


def check_replay(batch: m.MetadataRecordBatch | None) -> None:
    if batch is None:
        return
    with contextlib.suppress(MetadataReplayError):
        replay(IMAGE, batch)
    assert to_snapshot(IMAGE).SerializeToString() == IMAGE_SNAPSHOT, "replay changed the image"


@given(batch=metadata_batches())
def test_metadata_replay_answers_an_image_or_a_replay_error(batch) -> None:
    check_replay(batch)


@pytest.mark.slow
@SLOW
@given(batch=metadata_batches())
def test_metadata_replay_slow(batch) -> None:
    check_replay(batch)


@st.composite
def snapshots(draw: st.DrawFn) -> m.MetadataSnapshot | None:
    if draw(st.booleans()):
        try:
            return m.MetadataSnapshot.FromString(draw(random_or_mutated([IMAGE_SNAPSHOT])))
        except DecodeError:
            return None
    return m.MetadataSnapshot(
        end_offset=draw(st.sampled_from([IMAGE.end_offset, 0, -1]) | INT64),
        hash=draw(st.sampled_from([IMAGE.hash, b""]) | st.binary(max_size=17)),
        timestamp_ms=draw(INT64),
        records=draw(st.lists(records(), max_size=8)),
    )


def check_snapshot(snapshot: m.MetadataSnapshot | None) -> None:
    if snapshot is None:
        return
    with contextlib.suppress(InvalidSnapshotError):
        from_snapshot(snapshot)


@given(snapshot=snapshots())
def test_snapshot_loading_answers_an_image_or_invalid_snapshot(snapshot) -> None:
    check_snapshot(snapshot)


@pytest.mark.slow
@SLOW
@given(snapshot=snapshots())
def test_snapshot_loading_slow(snapshot) -> None:
    check_snapshot(snapshot)


# --- the log recovery scan ----------------------------------------------------------------------


def scan(data: bytes, chunk_bytes: int, base_offset: int) -> SegmentScan:
    """Feed `data` as segment.py does: reads of at least `chunk_bytes` from the valid prefix."""
    segment = SegmentScan(base_offset, index_interval_bytes=64)
    want = chunk_bytes
    for _ in range(len(data) + 2):  # each feed consumes a batch or ends: a hang is a failure
        start = segment.valid_bytes
        chunk = data[start : start + max(want, chunk_bytes)]
        want = segment.feed(chunk, end_of_file=start + len(chunk) >= len(data))
        if not want:
            return segment
    raise AssertionError("the scan asked for more bytes forever")


def check_scan(data: bytes, chunk_bytes: int, base_offset: int) -> None:
    whole = scan(data, len(data) + 1, base_offset)
    assert whole.done and 0 <= whole.valid_bytes <= len(data)
    assert (whole.error is None) == (whole.valid_bytes == len(data))
    chunked = scan(data, chunk_bytes, base_offset)
    assert (chunked.valid_bytes, chunked.error is None) == (whole.valid_bytes, whole.error is None)
    assert chunked.epoch_starts == whole.epoch_starts


SEGMENTS = random_or_mutated([SEGMENT, VALID_BATCHES[2] + VALID_BATCHES[0]])


@given(data=SEGMENTS, chunk_bytes=st.integers(1, 300), base_offset=st.sampled_from([0, 3, 2**40]))
def test_recovery_scan_is_total_and_chunking_does_not_matter(
    data: bytes, chunk_bytes: int, base_offset: int
) -> None:
    check_scan(data, chunk_bytes, base_offset)


@pytest.mark.slow
@SLOW
@given(data=SEGMENTS, chunk_bytes=st.integers(1, 300), base_offset=st.sampled_from([0, 3, 2**40]))
def test_recovery_scan_slow(data: bytes, chunk_bytes: int, base_offset: int) -> None:
    check_scan(data, chunk_bytes, base_offset)


def test_recovery_scan_keeps_a_valid_segment_whole() -> None:
    assert scan(SEGMENT, 50, 0).valid_bytes == len(SEGMENT)
    assert scan(SEGMENT + b"\x00" * 30, 50, 0).valid_bytes == len(SEGMENT)

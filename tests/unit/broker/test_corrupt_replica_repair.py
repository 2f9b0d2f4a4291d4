"""Goal: a replica known to be corrupt truncates only once the applied metadata shows it out of
the ISR and not leading (DESIGN §4: an ISR member with a shortened log could be elected and lose
acknowledged records), and a leader never lets a follower back into the ISR on progress it
reported before it left.

Method: a PartitionHost over a real log in tmp_path, driven by hand-made metadata images (as in
test_broker_requests); a byte of a closed segment is flipped on disk, the partition is marked
corrupt from that batch, and images move the ISR and the leadership while the test checks the
log end offset.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.common.record.header import check_batch
from samsa.metadata.image import BrokerRegistration, MetadataImage, PartitionState, TopicImage
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.scrub import CorruptBatch
from samsa.services.broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, segment_path
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.isr_manager import decide_proposals
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.list_offsets import list_offsets
from samsa.v1 import broker_pb2 as b

TOPIC_ID = b"\x09" * 16
ME = 1


def image(
    leader: int,
    isr: tuple[int, ...],
    epoch: int,
    partition_epoch: int,
    elr: tuple[int, ...] = (),
) -> MetadataImage:
    state = PartitionState(0, (1, 2, 3), isr, leader, epoch, partition_epoch, elr)
    return MetadataImage(
        end_offset=10 + partition_epoch,
        hash=b"\x00" * 16,
        timestamp_ms=0,
        brokers={b: BrokerRegistration(b, "i", f"h:{b}", "", 0, False) for b in (1, 2, 3)},
        topics={"t": TopicImage("t", TOPIC_ID, {0: state})},
        topic_names={TOPIC_ID: "t"},
        configs={},
    )


def step(host: PartitionHost, new: MetadataImage) -> HostedPartition:
    host.apply(new, partition_changes(host.image, new, ME), now_ms=0)
    hosted = host.get("t", 0)
    assert hosted is not None
    return hosted


def corrupt_replica(tmp_path: Path, leader: int) -> tuple[PartitionHost, HostedPartition, int]:
    """A host whose replica of t-0 holds 60 batches over several 2 KiB segments, one byte of a
    closed segment flipped, marked corrupt from that batch's base offset."""
    host = PartitionHost(tmp_path, ME)
    hosted = step(host, image(leader, (1, 2, 3), 0, 0))
    hosted.log.reconfigure(
        LogConfig(segment_bytes=2048, index_interval_bytes=128, max_message_bytes=1024)
    )
    for n in range(60):
        hosted.log.append_as_leader(build_batch([b"v" * 50 + b"%d" % n]), leader_epoch=0, now_ms=0)
    hosted.replica.high_watermark = hosted.log.log_end_offset
    base_offset = hosted.log.closed_segments()[1][0]
    path = segment_path(hosted.log.directory, base_offset, LOG_SUFFIX)
    data = path.read_bytes()
    second = check_batch(data, 0).size_bytes
    header = check_batch(data, second)
    with path.open("r+b") as file:
        file.seek(second + header.size_bytes - 2)
        file.write(bytes([data[second + header.size_bytes - 2] ^ 1]))
    segment_size = hosted.log.closed_segments()[1][2]
    corrupt = CorruptBatch(header.base_offset, base_offset, segment_size, second)
    assert host.mark_corrupt(hosted, corrupt)
    later = CorruptBatch(header.base_offset + 5, base_offset, segment_size, second + 100)
    assert not host.mark_corrupt(hosted, later), "the first bad offset wins"
    return host, hosted, header.base_offset


def test_a_corrupt_follower_truncates_only_once_out_of_the_isr(tmp_path: Path) -> None:
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=2)
    end = hosted.log.log_end_offset
    assert host.repair_corrupt() == [] and hosted.log.log_end_offset == end, "still in the ISR"
    hosted = step(host, image(2, (1, 2, 3), 0, 1))  # an unrelated change: still in the ISR
    assert hosted.log.log_end_offset == end and hosted.corrupt_from == bad_offset
    hosted = step(host, image(2, (2, 3), 0, 2))  # the controller committed the report
    assert hosted.log.log_end_offset == bad_offset and hosted.corrupt_from is None
    assert hosted.high_watermark == bad_offset
    host.close_all()


def test_a_corrupt_eligible_replica_truncates_only_once_out_of_the_elr(tmp_path: Path) -> None:
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=2)
    end = hosted.log.log_end_offset
    hosted = step(host, image(2, (2,), 0, 1, elr=(1, 3)))  # out of the ISR, still eligible
    assert hosted.log.log_end_offset == end and hosted.corrupt_from == bad_offset, (
        "an eligible replica may be elected cleanly: it keeps every record until it leaves"
    )
    hosted = step(host, image(2, (2,), 0, 2, elr=(3,)))  # the controller committed the report
    assert hosted.log.log_end_offset == bad_offset and hosted.corrupt_from is None
    host.close_all()


def test_a_corrupt_leader_truncates_only_once_it_no_longer_leads(tmp_path: Path) -> None:
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=ME)
    end = hosted.log.log_end_offset
    hosted = step(host, image(ME, (1, 2, 3), 0, 1))
    assert hosted.log.log_end_offset == end and hosted.is_leader
    hosted = step(host, image(2, (2, 3), 1, 2))  # leadership handed over, out of the ISR
    assert not hosted.is_leader and hosted.log.log_end_offset == bad_offset
    host.close_all()


def test_a_follower_that_leaves_the_isr_must_fetch_again_to_rejoin(tmp_path: Path) -> None:
    host = PartitionHost(tmp_path, ME)
    hosted = step(host, image(ME, (1, 2, 3), 0, 0))
    for n in range(5):
        hosted.log.append_as_leader(build_batch([b"%d" % n]), leader_epoch=0, now_ms=0)
    hosted.replica.follower_fetched(2, 5, 5, now_ms=0)
    hosted.replica.follower_fetched(3, 5, 5, now_ms=0)
    assert hosted.advance_high_watermark() and hosted.high_watermark == 5
    hosted = step(host, image(ME, (1, 3), 0, 1))  # 2 reported itself corrupt
    rejoin = {
        "eligible": {1, 2, 3},
        "lag_max_ms": 1000,
        "log_end_offset": 5,
        "replica_fetch_ms": {2: 2},
    }
    proposal = hosted.replica.isr_to_propose(now_ms=1, **rejoin)
    assert proposal is None, "progress from before it left does not bring it back"
    hosted.replica.follower_fetched(2, 5, 5, now_ms=2)  # a fetch after leaving does
    proposal = hosted.replica.isr_to_propose(now_ms=2, **rejoin)
    assert proposal == (1, 2, 3)
    host.close_all()


def test_the_partitions_repaired_are_told_to_the_fetchers(tmp_path: Path) -> None:
    """The broker sets `on_repaired` to ReplicaFetchers.repaired: a repair must re-position the
    partition in its fetch session at once (test_replica_fetcher_corrupt.py says why)."""
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=2)
    told: list[list[tuple[str, int]]] = []
    host.on_repaired = told.append
    assert host.repair_corrupt() == [] and told == [], "still in the ISR: nothing to tell"
    hosted = step(host, image(2, (2, 3), 0, 1))  # out of the ISR: repaired within apply
    assert hosted.log.log_end_offset == bad_offset and told == [[("t", 0)]]
    host.close_all()


def test_a_durable_segment_found_bad_at_open_is_marked_and_cut_only_once_out(
    tmp_path: Path,
) -> None:
    """After a clean stop the broker re-registers in the ISR: a bad batch the open finds in a
    durable segment (its .index lost, so re-read) is kept, every segment with it, and the
    replica marked corrupt as on a scrubber finding; the cut waits for the metadata."""
    host = PartitionHost(tmp_path, ME)
    hosted = step(host, image(2, (1, 2, 3), 0, 0))
    hosted.log.reconfigure(
        LogConfig(segment_bytes=2048, index_interval_bytes=128, max_message_bytes=1024)
    )
    for n in range(60):
        hosted.log.append_as_leader(build_batch([b"v" * 50 + b"%d" % n]), leader_epoch=0, now_ms=0)
    directory, end = hosted.log.directory, hosted.log.log_end_offset
    base_offset = hosted.log.closed_segments()[1][0]
    host.close_all()
    path = segment_path(directory, base_offset, LOG_SUFFIX)
    data = bytearray(path.read_bytes())
    second = check_batch(data, 0).size_bytes
    bad_offset = check_batch(data, second).base_offset
    data[second + 70] ^= 1
    path.write_bytes(bytes(data))
    segment_path(directory, base_offset, INDEX_SUFFIX).unlink()

    host = PartitionHost(tmp_path, ME)
    hosted = step(host, image(2, (1, 2, 3), 0, 1))
    assert hosted.corrupt == CorruptBatch(bad_offset, base_offset, len(data), second)
    assert ("t", 0) in host.corrupt_partitions, "the scrubber's report loop takes it from here"
    assert host.repair_corrupt() == [] and hosted.log.log_end_offset == end, "still in the ISR"
    hosted = step(host, image(2, (2, 3), 0, 2))  # the controller committed the report
    assert hosted.log.log_end_offset == bad_offset and hosted.corrupt_from is None
    host.close_all()


def unframed_leader(
    tmp_path: Path, segment: int = -1
) -> tuple[PartitionHost, HostedPartition, int]:
    """A host that led t-0 with 60 acknowledged records, restarted (cleanly) with the length of
    a batch of its `segment` (the active one by default) flipped and its .index lost: the open
    keeps the bytes after the bad batch unframed (in the active segment, the log end offset
    drops to that batch's base offset)."""
    host = PartitionHost(tmp_path, ME)
    hosted = step(host, image(ME, (1, 2, 3), 0, 0))
    hosted.log.reconfigure(
        LogConfig(segment_bytes=2048, index_interval_bytes=128, max_message_bytes=1024)
    )
    for n in range(60):
        hosted.log.append_as_leader(build_batch([b"v" * 50 + b"%d" % n]), leader_epoch=0, now_ms=0)
    hosted.replica.high_watermark = 60
    directory, damaged = hosted.log.directory, hosted.log.segments()[segment].base_offset
    host.close_all()
    path = segment_path(directory, damaged, LOG_SUFFIX)
    data = bytearray(path.read_bytes())
    second = check_batch(data, 0).size_bytes
    bad_offset = check_batch(data, second).base_offset
    data[second + 9] ^= 0x55  # in the batch's length: its framing is lost
    path.write_bytes(bytes(data))
    segment_path(directory, damaged, INDEX_SUFFIX).unlink()
    host = PartitionHost(tmp_path, ME)
    hosted = step(host, image(ME, (1, 2, 3), 1, 1))
    assert hosted.corrupt_from == bad_offset
    assert hosted.log.log_end_offset == (bad_offset if segment == -1 else 60)
    return host, hosted, bad_offset


def test_a_timestamp_lookup_past_an_unframed_tail_answers_a_storage_error(
    tmp_path: Path,
) -> None:
    host, _, bad_offset = unframed_leader(tmp_path, segment=1)
    spec = b.ListOffsetsRequest.PartitionData
    request = b.ListOffsetsRequest(
        replica_id=2,  # answered up to the log end
        topics=[
            b.ListOffsetsRequest.TopicData(
                name="t",
                partitions=[
                    spec(partition=0, offset_spec=b.OFFSET_SPEC_TIMESTAMP, timestamp_ms=0),
                    spec(partition=0, offset_spec=b.OFFSET_SPEC_TIMESTAMP, timestamp_ms=10**15),
                    spec(partition=0, offset_spec=b.OFFSET_SPEC_MAX_TIMESTAMP),
                ],
            )
        ],
    )
    first, past, newest = list_offsets(host, request).topics[0].partitions
    assert (first.error_code, first.offset) == (ErrorCode.NONE, 0)
    for refused in (past, newest):
        assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR and refused.offset == -1
        assert f"offsets from {bad_offset} are unreadable" in refused.error_message
    host.close_all()


def fetch_one(
    host: PartitionHost, offset: int, last_fetched_epoch: int = -1, replica_id: int = 2
) -> b.FetchResponse.PartitionResponse:
    """A fetch of t-0 by replica 2 (a consumer with replica_id -1)."""
    wanted = b.FetchRequest.PartitionData(
        partition=0, fetch_offset=offset, last_fetched_epoch=last_fetched_epoch
    )
    request = b.FetchRequest(
        replica_id=replica_id, topics=[b.FetchRequest.TopicData(name="t", partitions=[wanted])]
    )
    return asyncio.run(fetch(host, request)).topics[0].partitions[0]


def test_a_leader_whose_log_end_is_unknown_serves_no_leader_request(tmp_path: Path) -> None:
    """Elected with its log end at the bad batch (58 of 60 acknowledged), the leader answered a
    follower holding 0..59 with a diverging epoch ending at 58, or OFFSET_OUT_OF_RANGE with a
    high watermark of 58: the follower truncated acknowledged records. It refuses every leader
    request now (KAFKA_STORAGE_ERROR, as Kafka's offline log directory), consumers included,
    proposes no ISR shrink for followers it refuses, and repairs once another replica leads."""
    host, hosted, bad_offset = unframed_leader(tmp_path)
    assert hosted.log.log_end_offset == bad_offset < 60 and hosted.log.log_end_unknown
    for last_fetched_epoch in (0, -1):
        result = fetch_one(host, 60, last_fetched_epoch)
        assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert not result.HasField("diverging_epoch") and "log end is unknown" in (
            result.error_message
        )
    consumer = fetch_one(host, 0, replica_id=-1)
    assert consumer.error_code == ErrorCode.KAFKA_STORAGE_ERROR and not consumer.records
    latest = b.ListOffsetsRequest(
        topics=[
            b.ListOffsetsRequest.TopicData(
                name="t",
                partitions=[
                    b.ListOffsetsRequest.PartitionData(
                        partition=0, offset_spec=b.OFFSET_SPEC_LATEST
                    )
                ],
            )
        ]
    )
    answered = list_offsets(host, latest).topics[0].partitions[0]
    assert answered.error_code == ErrorCode.KAFKA_STORAGE_ERROR and answered.offset == -1
    assert decide_proposals(host, {("t", 0)}, now_ms=10**9, lag_max_ms=1) == []
    hosted = step(host, image(2, (2, 3), 2, 2))  # the controller took the report: 2 leads
    assert not hosted.is_leader and hosted.corrupt_from is None, "repaired"
    assert hosted.log.log_end_offset == bad_offset and not hosted.log.log_end_unknown
    host.close_all()


def test_a_scrubber_mark_survives_a_restart_until_the_repair(tmp_path: Path) -> None:
    """The mark was in memory only: after a restart the replica, back in the ISR, served the bad
    batch as sound until the scrubber's next pass (its cursor had moved past the segment)."""
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=2)
    found = hosted.corrupt
    host.close_all()
    host = PartitionHost(tmp_path, ME)
    hosted = step(host, image(2, (1, 2, 3), 0, 1))
    assert hosted.corrupt == found and ("t", 0) in host.corrupt_partitions
    hosted = step(host, image(2, (2, 3), 0, 2))  # the controller committed the report
    assert hosted.log.log_end_offset == bad_offset and hosted.corrupt is None
    host.close_all()
    host = PartitionHost(tmp_path, ME)
    assert step(host, image(2, (2, 3), 0, 3)).corrupt is None, "repaired: forgotten"
    host.close_all()

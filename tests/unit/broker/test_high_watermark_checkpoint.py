"""Goal: one high-watermark checkpoint file per data directory, written only when a high watermark
moved, read once at start, and never trusted above a partition's log end; the maintenance loop's
frequent work looks only at the partitions the host reports changed, so an idle host writes and
flushes nothing.

Method: the pure codec directly; then a PartitionHost over real logs in tmp_path driven by a
hand-made metadata image, with the maintenance steps (`take_changes`, `flush_pending`,
`checkpoint_pending`) called one at a time. Writes are observed on the file itself (its bytes and
inode: an atomic rewrite replaces the inode).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_host import two_broker_image

from samsa.common.record.codec import build_batch
from samsa.metadata.image import MetadataImage
from samsa.services.broker.log.checkpoint_format import CorruptCheckpointError
from samsa.services.broker.maintenance import (
    Pending,
    checkpoint_pending,
    flush_pending,
    take_changes,
)
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.high_watermark_checkpoint import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    decode_high_watermarks,
    encode_high_watermarks,
)

TOPIC_ID = b"\x07" * 16
PARTITIONS = 4


def started_host(data_dir: Path, configs: dict[str, str] | None = None) -> PartitionHost:
    host = PartitionHost(data_dir, broker_id=1)
    # Broker 1 leads with broker 2 in the ISR: only the test moves the high watermarks. The
    # topic's dot and dash are there for the checkpoint file's parsing.
    new = two_broker_image(TOPIC_ID, PARTITIONS, configs, topic="t.x-1")
    host.apply(new, partition_changes(MetadataImage.empty(), new, 1), now_ms=0)
    return host


def append(host: PartitionHost, partition: int, count: int) -> None:
    """Leader appends, then the high watermark reaches the log end (the follower caught up),
    each change reported as the produce and fetch paths report them."""
    hosted = host.partitions[("t.x-1", partition)]
    for index in range(count):
        hosted.log.append_as_leader(build_batch([b"v%d" % index]), leader_epoch=0, now_ms=0)
        hosted.notify_appended()
    hosted.replica.high_watermark = hosted.log.log_end_offset
    hosted.notify_appended()


def checkpoint_file(data_dir: Path) -> Path:
    return data_dir / HIGH_WATERMARK_CHECKPOINT_FILE


def one_pass(host: PartitionHost, pending: Pending, *, now_ms: int = 0) -> bool:
    take_changes(host, pending)
    flush_pending(host, pending, now_ms=now_ms)
    return checkpoint_pending(host, pending)


def test_the_codec_round_trips_and_sorts() -> None:
    entries = {("b", 1): 7, ("a.b_c-D", 0): 0, ("a.b_c-D", 12): 123456789012}
    data = encode_high_watermarks(entries)
    assert data == b"0\n3\na.b_c-D 0 0\na.b_c-D 12 123456789012\nb 1 7\n"
    assert decode_high_watermarks(data) == entries
    assert decode_high_watermarks(encode_high_watermarks({})) == {}


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"0\n",
        b"1\n0\n",  # unknown version
        b"0\n2\nt 0 1\n",  # count disagrees
        b"0\n1\nt 0\n",
        b"0\n1\nt 0 -1\n",
        b"0\n1\nt x 1\n",
        b"0\n1\n 0 1\n",
        b"0\n2\nt 0 1\nt 0 2\n",  # one partition twice
        b"0\n1\nt\xff 0 1\n",
    ],
)
def test_the_codec_refuses_malformed_files(data: bytes) -> None:
    with pytest.raises(CorruptCheckpointError):
        decode_high_watermarks(data)


def test_a_new_host_writes_no_checkpoint_until_a_high_watermark_moves(tmp_path: Path) -> None:
    host = started_host(tmp_path)
    pending = Pending()
    assert not one_pass(host, pending), "the leadership changes moved no high watermark"
    assert not checkpoint_file(tmp_path).exists()
    assert not list(tmp_path.glob("*/high-watermark.checkpoint")), "no per-partition file"
    host.close_all()
    assert not checkpoint_file(tmp_path).exists(), "nothing to write at close either"


def test_a_moved_high_watermark_is_written_once_and_an_idle_host_writes_nothing(
    tmp_path: Path,
) -> None:
    host = started_host(tmp_path)
    pending = Pending()
    one_pass(host, pending)
    append(host, 2, 3)
    assert host.changed == {("t.x-1", 2)}
    assert one_pass(host, pending)
    expected = {("t.x-1", p): 3 if p == 2 else 0 for p in range(PARTITIONS)}
    assert decode_high_watermarks(checkpoint_file(tmp_path).read_bytes()) == expected
    inode = checkpoint_file(tmp_path).stat().st_ino
    for _ in range(3):
        assert not one_pass(host, pending), "idle: nothing changed"
    host.partitions[("t.x-1", 1)].notify_appended()  # a change that moved no high watermark
    assert not one_pass(host, pending)
    assert checkpoint_file(tmp_path).stat().st_ino == inode, "never rewritten"
    assert host.changed == set()
    host.close_all()
    assert checkpoint_file(tmp_path).stat().st_ino == inode, "close had nothing new to write"


def test_a_restarted_host_takes_its_high_watermarks_from_the_file_capped_at_the_log_end(
    tmp_path: Path,
) -> None:
    host = started_host(tmp_path)
    append(host, 0, 5)
    append(host, 1, 2)
    host.close_all()
    assert decode_high_watermarks(checkpoint_file(tmp_path).read_bytes())[("t.x-1", 0)] == 5
    data = checkpoint_file(tmp_path).read_bytes().replace(b"t.x-1 1 2", b"t.x-1 1 99")
    checkpoint_file(tmp_path).write_bytes(data)
    restarted = started_host(tmp_path)
    high_watermarks = {key[1]: h.high_watermark for key, h in restarted.partitions.items()}
    assert high_watermarks == {0: 5, 1: 2, 2: 0, 3: 0}, "99 is above the log end of 2"
    assert one_pass(restarted, Pending()), "the capped value replaces the one above the log"
    assert decode_high_watermarks(checkpoint_file(tmp_path).read_bytes())[("t.x-1", 1)] == 2
    restarted.close_all()


def test_an_unreadable_file_starts_every_partition_at_zero(tmp_path: Path) -> None:
    host = started_host(tmp_path)
    append(host, 0, 5)
    host.close_all()
    checkpoint_file(tmp_path).write_bytes(b"0\n1\nt.x-1 0\n")
    restarted = started_host(tmp_path)
    assert restarted.partitions[("t.x-1", 0)].high_watermark == 0
    assert restarted.partitions[("t.x-1", 0)].log.log_end_offset == 5
    restarted.close_all()


def test_only_logs_with_unflushed_records_stay_pending_until_flush_ms_flushes_them(
    tmp_path: Path,
) -> None:
    host = started_host(tmp_path, {"flush.ms": "1000"})
    pending = Pending()
    one_pass(host, pending, now_ms=0)
    assert pending.unflushed == set(), "opened logs hold nothing unflushed"
    append(host, 3, 2)
    hosted = host.partitions[("t.x-1", 3)]
    one_pass(host, pending, now_ms=500)
    assert pending.unflushed == {("t.x-1", 3)} and hosted.log.recovery_point == 0
    one_pass(host, pending, now_ms=999)
    assert pending.unflushed == {("t.x-1", 3)}, "kept: flush.ms has not passed yet"
    one_pass(host, pending, now_ms=1_000)
    assert pending.unflushed == set()
    assert hosted.log.recovery_point == 2 and not hosted.log.has_unflushed_records
    host.close_all()

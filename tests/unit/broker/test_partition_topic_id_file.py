"""Goal: a partition's topic_id file never loses a flushed record. It was written without an
fsync and never synced, so an OS crash could leave it empty beside flushed segments, and the
next open took an empty (or missing, or garbled) file for a deleted topic's and wiped the
directory, flushed records included. Now the log's first flush fsyncs the file, the directory
and the directory's entry in the data directory before any record, creating partitions still
costs no fsync, and an open that finds records under an unreadable id refuses with a
StorageError instead of wiping (Kafka refuses a partition.metadata it cannot read).

Method: a PartitionHost over a temp data directory, written by the broker's own produce; fsyncs
and fdatasyncs recorded by inode, in order, through wrappers around os's; the file damaged by
hand between two hosts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.errors import StorageError
from samsa.common.record.codec import build_batch
from samsa.metadata.image import MetadataImage
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_directory import TOPIC_ID_FILE
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2 as b

TOPIC_ID = b"\x07" * 16
IMAGE = single_broker_image({"t": (TOPIC_ID, led_partitions(2))})


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The inodes fsynced or fdatasynced, in order."""
    inodes: list[int] = []

    def recording(real: Callable[[int], None]) -> Callable[[int], None]:
        def synced(fd: int) -> None:
            real(fd)
            inodes.append(os.fstat(fd).st_ino)

        return synced

    for name in ("fsync", "fdatasync"):
        monkeypatch.setattr(os, name, recording(getattr(os, name)))
    yield inodes


def write(host: PartitionHost, partition: int = 0) -> None:
    data = b.ProduceRequest.PartitionData(partition=partition, records=build_batch([b"v"]))
    topics = [b.ProduceRequest.TopicData(name="t", partitions=[data])]
    produce(host, b.ProduceRequest(acks=1, topics=topics), 5)


def reopen(data_dir: Path) -> PartitionHost:
    host = PartitionHost(data_dir, broker_id=1)
    host.apply(IMAGE, partition_changes(MetadataImage.empty(), IMAGE, 1), now_ms=0)
    return host


def test_the_first_flush_makes_the_topic_id_durable_before_any_record(
    tmp_path: Path, fsynced: list[int]
) -> None:
    with hosting(tmp_path, IMAGE) as host:
        assert fsynced == [], "creating partitions costs no fsync"
        write(host)
        partition_dir = tmp_path / "t-0"
        inode = {name: (partition_dir / name).stat().st_ino for name in os.listdir(partition_dir)}
        host.get("t", 0).log.flush()
        first_segment = fsynced.index(inode["00000000000000000000.log"])
        before = fsynced[:first_segment]
        assert inode[TOPIC_ID_FILE] in before
        assert partition_dir.stat().st_ino in before, "the file's entry in its directory"
        assert tmp_path.stat().st_ino in before, "the directory's entry in the data directory"
        fsynced.clear()
        write(host)
        host.get("t", 0).log.flush()
        assert inode[TOPIC_ID_FILE] not in fsynced, "once per log"


def test_a_log_opened_empty_makes_its_existing_topic_id_durable_too(
    tmp_path: Path, fsynced: list[int]
) -> None:
    with hosting(tmp_path, IMAGE):
        pass  # created, closed without a record: the file may never have reached the disk
    host = reopen(tmp_path)
    try:
        write(host)
        fsynced.clear()
        host.get("t", 0).log.flush()
        assert (tmp_path / "t-0" / TOPIC_ID_FILE).stat().st_ino in fsynced
    finally:
        host.close_all()


@pytest.mark.parametrize("damage", [b"", b"\x07" * 15, b"garbage, not an id", None])
def test_records_under_an_unreadable_topic_id_are_refused_not_wiped(
    tmp_path: Path, damage: bytes | None
) -> None:
    with hosting(tmp_path, IMAGE) as host:
        write(host)
    id_file = tmp_path / "t-0" / TOPIC_ID_FILE
    if damage is None:
        id_file.unlink()
    else:
        id_file.write_bytes(damage)
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    records = segment.read_bytes()
    with pytest.raises(StorageError, match="holds records but its topic_id file is"):
        reopen(tmp_path)
    assert segment.read_bytes() == records, "nothing deleted"


def test_a_creation_cut_short_before_any_record_is_created_again(tmp_path: Path) -> None:
    with hosting(tmp_path, IMAGE):
        pass
    (tmp_path / "t-0" / TOPIC_ID_FILE).write_bytes(b"")  # an OS crash right after creation
    host = reopen(tmp_path)
    try:
        assert host.get("t", 0).log.log_end_offset == 0
        assert (tmp_path / "t-0" / TOPIC_ID_FILE).read_bytes() == TOPIC_ID
    finally:
        host.close_all()

"""Goal: a metadata snapshot of any size reaches a follower, in chunks of bounded size, and the
follower loads only the whole snapshot the controller named (KIP-630's FetchSnapshot).

A FetchMetadata answer carried the whole snapshot, and gRPC sends no message beyond
limits.grpc_message_bytes_max (80 MiB): past ~2 million partitions at replication factor 3 a new
or lagging member could never catch up (/tmp/review_metasnap/test_snapshot_over_message_cap.py:
84,576,917 bytes for 2.1M partitions). Now the answer names the snapshot (end offset, hash,
length, CRC-32) and the follower reads it in chunks; it checks the assembled bytes against that
id, so bytes of another snapshot (a controller whose log moved on, another controller) are never
applied.

Method: the pure ends (metadata/snapshot_transfer.py) with a chunk bound lowered to 1 KiB,
over an image of 300 partitions (~14 KiB of snapshot) and its log.
"""

from __future__ import annotations

import zlib

import pytest
from metadata_helpers import partition, register, topic

from samsa.common import limits
from samsa.metadata.history import MetadataHistory
from samsa.metadata.image import INITIAL_HASH, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.metadata.snapshot import InvalidSnapshotError, to_snapshot
from samsa.metadata.snapshot_transfer import ServedSnapshot, SnapshotAssembler, SnapshotCache
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

CHUNK_BYTES = 1024


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "metadata_snapshot_chunk_bytes", CHUNK_BYTES)


def log_of(*batches: list[m.MetadataRecord]) -> tuple[list[MetadataImage], MetadataHistory]:
    """The images after each batch, and a controller's history holding every batch."""
    images = [MetadataImage.empty()]
    history = MetadataHistory(start_offset=0, start_hash=INITIAL_HASH, max_batches=100)
    for records in batches:
        batch = make_batch(images[-1], records, 1000)
        images.append(replay(images[-1], batch))
        history.append(batch, images[-1].hash)
    return images, history


def topic_of(name: str, partitions: int) -> list[m.MetadataRecord]:
    topic_id = name.encode().ljust(16, b"-")
    return [topic(name, topic_id)] + [partition(topic_id, p, [1, 2, 3]) for p in range(partitions)]


IMAGES, HISTORY = log_of([register(1), register(2), register(3)], topic_of("a", 300), [register(4)])


def transfer(served: ServedSnapshot, max_bytes: int = 0) -> tuple[MetadataImage, list[int]]:
    """The image a follower loads from `served`, and the size of each chunk it got."""
    assembler = SnapshotAssembler(served.snapshot_id)
    sizes = []
    while not assembler.done:
        chunk = served.chunk(assembler.position, max_bytes)
        sizes.append(len(chunk))
        assembler.accept(chunk)
    return assembler.image(), sizes


def test_a_snapshot_crosses_in_chunks_no_larger_than_the_bound() -> None:
    served = ServedSnapshot(to_snapshot(IMAGES[-1]))
    assert served.snapshot_id.size_bytes > 10 * CHUNK_BYTES
    image, sizes = transfer(served)
    assert image == IMAGES[-1]
    assert max(sizes) == CHUNK_BYTES and sum(sizes) == served.snapshot_id.size_bytes
    _, asked_smaller = transfer(served, max_bytes=100)
    assert max(asked_smaller) == 100
    _, asked_larger = transfer(served, max_bytes=10 * CHUNK_BYTES)
    assert max(asked_larger) == CHUNK_BYTES, "a request cannot lift the bound"


def test_the_id_names_the_log_position_and_the_bytes() -> None:
    served = ServedSnapshot(to_snapshot(IMAGES[-1]))
    snapshot_id = served.snapshot_id
    assert (snapshot_id.end_offset, snapshot_id.hash) == (IMAGES[-1].end_offset, IMAGES[-1].hash)
    assert (snapshot_id.size_bytes, snapshot_id.crc32) == (
        len(served.data),
        zlib.crc32(served.data),
    )


def chunks_of(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]


def test_bytes_of_another_snapshot_under_the_same_length_are_refused() -> None:
    named = ServedSnapshot(to_snapshot(IMAGES[-1])).snapshot_id
    other = to_snapshot(IMAGES[-1])
    other.hash = b"x" * 16  # the same records at the same offset on another log
    assembler = SnapshotAssembler(named)
    for chunk in chunks_of(other.SerializeToString()):
        assembler.accept(chunk)
    with pytest.raises(InvalidSnapshotError, match="CRC-32"):
        assembler.image()


def test_a_snapshot_that_is_not_at_the_offset_and_hash_named_is_refused() -> None:
    # Consistent bytes (length and CRC-32 match what the id says) of a snapshot at another
    # point of the log: the id's end offset and hash must be the snapshot's own.
    served = ServedSnapshot(to_snapshot(IMAGES[-2]))
    for end_offset, hash in (
        (IMAGES[-1].end_offset, IMAGES[-2].hash),
        (IMAGES[-2].end_offset, IMAGES[-1].hash),
    ):
        named = c.SnapshotId()
        named.CopyFrom(served.snapshot_id)
        named.end_offset, named.hash = end_offset, hash
        assembler = SnapshotAssembler(named)
        for chunk in chunks_of(served.data):
            assembler.accept(chunk)
        with pytest.raises(InvalidSnapshotError, match="not at the"):
            assembler.image()


def test_a_transfer_that_runs_short_or_long_is_refused() -> None:
    served = ServedSnapshot(to_snapshot(IMAGES[-1]))
    assembler = SnapshotAssembler(served.snapshot_id)
    assembler.accept(served.chunk(0, 0))
    with pytest.raises(InvalidSnapshotError, match="bytes of a snapshot"):
        assembler.image()  # not all there: nothing of it is loaded
    with pytest.raises(InvalidSnapshotError, match="ended at"):
        assembler.accept(b"")
    with pytest.raises(InvalidSnapshotError, match="runs past"):
        assembler.accept(served.data)


def test_a_snapshot_announced_beyond_the_follower_bound_is_refused_before_any_chunk() -> None:
    named = c.SnapshotId(
        end_offset=1, hash=b"h" * 16, size_bytes=limits.metadata_snapshot_bytes_max + 1
    )
    with pytest.raises(InvalidSnapshotError, match="at most"):
        SnapshotAssembler(named)


def snapshot_for(
    cache: SnapshotCache, image: MetadataImage, history: MetadataHistory, end_offset_min: int
) -> c.SnapshotId:
    """What a controller names to a follower (metadata_fetch.py): the cached one, else one built."""
    cached = cache.cached_for(image, history, end_offset_min)
    return cached if cached is not None else cache.add(ServedSnapshot.of(image))


def test_the_cache_serves_a_snapshot_while_it_lies_on_the_log() -> None:
    cache = SnapshotCache()
    assert cache.cached_for(IMAGES[2], HISTORY, end_offset_min=0) is None, "none built yet"
    first = snapshot_for(cache, IMAGES[2], HISTORY, end_offset_min=0)
    assert first.end_offset == IMAGES[2].end_offset
    # The log moved on; the batches after the snapshot are in the history: the same one.
    assert cache.cached_for(IMAGES[3], HISTORY, end_offset_min=0) == first
    assert cache.find(first) is not None
    # Not to a follower that has applied more than it holds: that would take it back.
    assert cache.cached_for(IMAGES[3], HISTORY, end_offset_min=IMAGES[3].end_offset) is None
    newer = snapshot_for(cache, IMAGES[3], HISTORY, end_offset_min=IMAGES[3].end_offset)
    assert newer.end_offset == IMAGES[3].end_offset
    assert cache.find(first) is not None, "a transfer under way still finishes"


def test_the_cache_builds_a_new_snapshot_once_the_history_left_the_old_one() -> None:
    cache = SnapshotCache(max_cached=1)
    first = snapshot_for(cache, IMAGES[1], HISTORY, end_offset_min=0)
    history = MetadataHistory(
        start_offset=IMAGES[2].end_offset, start_hash=IMAGES[2].hash, max_batches=100
    )
    assert cache.cached_for(IMAGES[2], history, end_offset_min=0) is None
    newer = snapshot_for(cache, IMAGES[2], history, end_offset_min=0)
    assert newer.end_offset == IMAGES[2].end_offset
    assert cache.find(first) is None, "one cached: the older is gone"
    unknown = c.SnapshotId()
    unknown.CopyFrom(newer)
    unknown.crc32 ^= 1
    assert cache.find(unknown) is None, "an id names one snapshot exactly"

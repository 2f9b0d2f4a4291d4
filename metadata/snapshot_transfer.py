"""Moving a metadata snapshot in chunks (KIP-630's FetchSnapshot), both ends.

A snapshot grows with the image (~41 bytes per partition at replication factor 3, more with
long topic names or configs): sent whole in one FetchMetadata answer it was capped at the gRPC
message bound (`limits.grpc_message_bytes_max`, 80 MiB, about two million partitions), past
which a new or lagging member could never catch up. So a FetchMetadata answer only names the
snapshot (`SnapshotId`: end offset and hash, the serialized length and CRC-32), and the follower
reads its bytes with FetchSnapshot from a position, at most `limits.metadata_snapshot_chunk_bytes`
at a time.

- The controller (`SnapshotCache`) serializes a snapshot once and serves its chunks from those
  bytes. It keeps answering the snapshot it built while that still lies on its log (the batches
  after it are in its history, so a follower that loads it catches up with them), so a transfer
  outlives the image moving on; it keeps the last `SNAPSHOTS_CACHED_MAX`, and a chunk of one it
  no longer holds is refused (the follower asks FetchMetadata again).
- The follower (`SnapshotAssembler`) takes the chunks in order, refuses more bytes than the id
  announced, and loads nothing until the whole is there: its length and CRC-32 match the id,
  it parses, and the snapshot is the one the id names (its end offset and hash, KIP-630's
  snapshot id with the hash in place of the epoch). Any mismatch is an InvalidSnapshotError:
  nothing of it is applied.
"""

from __future__ import annotations

import zlib
from collections import deque

from google.protobuf.message import DecodeError

from samsa.common import limits
from samsa.metadata.history import MetadataHistory
from samsa.metadata.image import MetadataImage
from samsa.metadata.snapshot import InvalidSnapshotError, from_snapshot, to_snapshot
from samsa.v1 import controller_pb2, metadata_pb2

# The snapshots a controller keeps serialized for transfers in progress: the newest serves new
# followers, the one before finishes transfers that began before it was built.
SNAPSHOTS_CACHED_MAX = 2


class ServedSnapshot:
    """One snapshot, serialized, as a controller serves it."""

    def __init__(self, snapshot: metadata_pb2.MetadataSnapshot) -> None:
        self.data = snapshot.SerializeToString()
        self.snapshot_id = controller_pb2.SnapshotId(
            end_offset=snapshot.end_offset,
            hash=snapshot.hash,
            size_bytes=len(self.data),
            crc32=zlib.crc32(self.data),
        )

    @classmethod
    def of(cls, image: MetadataImage) -> ServedSnapshot:
        """The snapshot of `image`, serialized. CPU-bound (~4 s a million partitions): a
        controller builds it off its event loop; `image` is never changed once made, so another
        thread may read it while the loop moves on to newer images."""
        return cls(to_snapshot(image))

    def chunk(self, position: int, max_bytes: int) -> bytes:
        """The bytes from `position` on, at most `max_bytes` (capped at the chunk bound)."""
        assert 0 <= position <= len(self.data)
        if max_bytes <= 0 or max_bytes > limits.metadata_snapshot_chunk_bytes:
            max_bytes = limits.metadata_snapshot_chunk_bytes
        return self.data[position : position + max_bytes]


class SnapshotCache:
    """The snapshots one controller serves, newest last (see the module docstring)."""

    def __init__(self, max_cached: int = SNAPSHOTS_CACHED_MAX) -> None:
        assert max_cached >= 1
        self._served: deque[ServedSnapshot] = deque(maxlen=max_cached)

    def cached_for(
        self, image: MetadataImage, history: MetadataHistory, end_offset_min: int
    ) -> controller_pb2.SnapshotId | None:
        """The snapshot to name to a follower that needs one and has applied up to
        `end_offset_min`: the newest built, while it lies on this controller's log (its end and
        hash are the image's, or a batch boundary of the history) and does not take the
        follower back. None: build one of `image` (`ServedSnapshot.of`) and `add` it."""
        if not self._served:
            return None
        newest = self._served[-1].snapshot_id
        on_log = (newest.end_offset, newest.hash) == (image.end_offset, image.hash) or (
            history.batches_since(newest.end_offset, newest.hash, 1) is not None
        )
        if on_log and newest.end_offset >= min(end_offset_min, image.end_offset):
            return newest
        return None

    def add(self, served: ServedSnapshot) -> controller_pb2.SnapshotId:
        """Serve `served` from now on, as the newest (the oldest kept goes beyond the bound)."""
        self._served.append(served)
        return served.snapshot_id

    def find(self, snapshot_id: controller_pb2.SnapshotId) -> ServedSnapshot | None:
        """The snapshot `snapshot_id` names, if this controller still holds it."""
        for served in self._served:
            if served.snapshot_id == snapshot_id:
                return served
        return None


class SnapshotAssembler:
    """A follower's snapshot being fetched: the chunks in order, checked whole at the end."""

    def __init__(
        self,
        snapshot_id: controller_pb2.SnapshotId,
        size_max: int = limits.metadata_snapshot_bytes_max,
    ) -> None:
        if not 0 <= snapshot_id.size_bytes <= size_max:
            raise InvalidSnapshotError(
                f"a snapshot of {snapshot_id.size_bytes} bytes; this follower takes at most "
                f"{size_max} (limits.metadata_snapshot_bytes_max)"
            )
        self.snapshot_id = snapshot_id
        self._data = bytearray()

    @property
    def position(self) -> int:
        """The bytes received so far: where the next chunk starts."""
        return len(self._data)

    @property
    def done(self) -> bool:
        return len(self._data) == self.snapshot_id.size_bytes

    def accept(self, chunk: bytes) -> None:
        """The next chunk. An empty one before the end, or one running past the announced
        length, is a snapshot other than the one named."""
        if not chunk and not self.done:
            raise InvalidSnapshotError(
                f"the snapshot ended at {len(self._data)} bytes of "
                f"{self.snapshot_id.size_bytes} announced"
            )
        if len(self._data) + len(chunk) > self.snapshot_id.size_bytes:
            raise InvalidSnapshotError(
                f"the snapshot runs past the {self.snapshot_id.size_bytes} bytes announced"
            )
        self._data += chunk

    def image(self) -> MetadataImage:
        """The image the whole snapshot describes, once it is checked against its id."""
        expected = self.snapshot_id
        if not self.done:
            raise InvalidSnapshotError(
                f"{len(self._data)} bytes of a snapshot of {expected.size_bytes}"
            )
        if zlib.crc32(self._data) != expected.crc32:
            raise InvalidSnapshotError("the snapshot's bytes do not match its CRC-32")
        snapshot = metadata_pb2.MetadataSnapshot()
        try:
            snapshot.ParseFromString(bytes(self._data))
        except DecodeError as error:
            raise InvalidSnapshotError(f"the snapshot does not parse: {error}") from error
        if (snapshot.end_offset, snapshot.hash) != (expected.end_offset, expected.hash):
            raise InvalidSnapshotError(
                f"the snapshot is at offset {snapshot.end_offset} hash {snapshot.hash.hex()}, "
                f"not at the {expected.end_offset} hash {expected.hash.hex()} named"
            )
        return from_snapshot(snapshot)

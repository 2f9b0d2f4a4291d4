"""Building metadata record batches and the running hash that chains them.

The running hash (proto/samsa/v1/metadata.proto) lets every replica of the metadata log check, at
each batch, that it applied exactly what the active controller generated against: the hash after
a batch is SHA-256 over the hash before it and each record serialized deterministically, cut to 16
bytes. A replica whose image has another hash at the same offset diverged, and must reload a
snapshot instead of serving a silently different cluster.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from samsa.metadata.image import MetadataImage
from samsa.v1 import metadata_pb2

HASH_BYTES = 16


def record_bytes(record: metadata_pb2.MetadataRecord) -> bytes:
    """The record's canonical encoding: deterministic, so every replica hashes the same bytes."""
    return record.SerializeToString(deterministic=True)


def chain_hash(previous_hash: bytes, records: Iterable[metadata_pb2.MetadataRecord]) -> bytes:
    """The running hash after `records`, given the hash before them."""
    digest = hashlib.sha256(previous_hash)
    for record in records:
        digest.update(record_bytes(record))
    return digest.digest()[:HASH_BYTES]


def make_batch(
    image: MetadataImage, records: Sequence[metadata_pb2.MetadataRecord], timestamp_ms: int
) -> metadata_pb2.MetadataRecordBatch:
    """A batch that appends `records` to the log `image` was replayed from."""
    if not records:
        raise ValueError("a metadata batch needs at least one record")
    return metadata_pb2.MetadataRecordBatch(
        base_offset=image.end_offset,
        previous_hash=image.hash,
        timestamp_ms=timestamp_ms,
        records=records,
    )

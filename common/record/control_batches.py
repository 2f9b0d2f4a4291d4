"""Control batches: the transaction markers (COMMIT or ABORT) that end a transaction in each of
its partitions, built (`build_control_batch`) and read back (`read_control_marker`). A marker is
a transactional control batch of one record whose key is int16 version | int16 type and whose
value is int16 version | int32 coordinator_epoch (docs/record-batch.md). Pure: no I/O, no clock,
no threads.
"""

from __future__ import annotations

import struct

from samsa.common.errors import InvalidRecordError
from samsa.common.record import header
from samsa.common.record.batch_encoding import build_batch
from samsa.common.record.record_batch import RecordBatch

__all__ = [
    "CONTROL_KEY_VERSION",
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "CONTROL_VALUE_VERSION",
    "build_control_batch",
    "read_control_marker",
]

# Control records (transaction markers): key = int16 version | int16 type,
# value = int16 version | int32 coordinator_epoch. Kafka's ControlRecordType ids.
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
CONTROL_KEY_VERSION = 0
CONTROL_VALUE_VERSION = 0
_CONTROL_KEY = struct.Struct("<hh")
_CONTROL_VALUE = struct.Struct("<hi")


def build_control_batch(
    marker_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = header.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker: a transactional control batch of one record (see the doc)."""
    if marker_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(
            f"control marker type {marker_type} is unknown: use 0 (ABORT) or 1 (COMMIT)"
        )
    try:
        value = _CONTROL_VALUE.pack(CONTROL_VALUE_VERSION, coordinator_epoch)
    except struct.error:
        raise InvalidRecordError(f"coordinator_epoch {coordinator_epoch} is not an int32") from None
    return build_batch(
        [value],
        keys=[_CONTROL_KEY.pack(CONTROL_KEY_VERSION, marker_type)],
        timestamps=timestamp,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def read_control_marker(batch: RecordBatch) -> tuple[int, int]:
    """(marker_type, coordinator_epoch) of a control batch; InvalidRecordError otherwise."""
    if not batch.header.is_control:
        raise InvalidRecordError("not a control batch: attribute bit 0x20 is clear")
    if len(batch) != 1:
        raise InvalidRecordError(f"a control batch holds exactly one record, this one {len(batch)}")
    key, value = batch.keys[0], batch.values[0]
    if key is None or len(key) != _CONTROL_KEY.size:
        raise InvalidRecordError(f"control record key must be {_CONTROL_KEY.size} bytes: {key!r}")
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise InvalidRecordError(
            f"control record value must be at least {_CONTROL_VALUE.size} bytes: {value!r}"
        )
    key_version, marker_type = _CONTROL_KEY.unpack(key)
    value_version, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    if key_version != CONTROL_KEY_VERSION or value_version != CONTROL_VALUE_VERSION:
        raise InvalidRecordError(
            f"control record versions {key_version}/{value_version} are unknown (expected 0/0)"
        )
    if marker_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(f"control marker type {marker_type} is unknown (0 or 1)")
    return marker_type, coordinator_epoch

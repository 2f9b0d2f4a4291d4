"""The words `samsa dump-log` prints: kafka-dump-log.sh's line shapes ("baseOffset: 0 lastOffset:
2 count: 3 ... crcValid: true", "| offset: 0 CreateTime: ... payload: hi") and the same facts as
JSON objects. Pure: results of the broker's dump modules in, strings and dicts out.

Keys and payloads are shown as text: UTF-8, with every byte that is not valid UTF-8 as `\\xNN`,
control characters escaped (`\\n`, `\\t`, `\\xNN`) and a backslash doubled, so that a record is
one line whatever it holds and the escapes are unambiguous; a null key or value is `null`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.common.record.codec import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT

if TYPE_CHECKING:
    from samsa.services.broker.log.dump import BatchDump, LogVerdict, RecordDump
    from samsa.services.broker.log.producer_snapshot_codec import ProducerSnapshot

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SURROGATE_ESCAPE_BASE = 0xDC00  # "surrogateescape" maps byte 0xNN (>= 0x80) to U+DCNN


def printable(raw: bytes | None) -> str:
    """`raw` as one line of unambiguous text (see the module docstring)."""
    if raw is None:
        return "null"
    text = raw.decode("utf-8", "surrogateescape")
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(map(_escape, text))


def _escape(character: str) -> str:
    if character in _ESCAPES:
        return _ESCAPES[character]
    code = ord(character)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - _SURROGATE_ESCAPE_BASE:02x}"
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    return character


def _flag(value: bool) -> str:
    return "true" if value else "false"


def batch_line(batch: BatchDump) -> str:
    """kafka-dump-log.sh's batch line."""
    h = batch.header
    time_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {batch.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_flag(h.is_transactional)} isControl: {_flag(h.is_control)} "
        f"position: {batch.position} {time_type}: {h.max_timestamp} size: {h.size_bytes} "
        f"magic: {h.magic} compresscodec: {batch.compression_name} "
        f"crcValid: {_flag(batch.crc_valid)}"
    )


def record_line(record: RecordDump, *, log_append_time: bool, data: bool) -> str:
    """kafka-dump-log.sh's record line: with `data`, the key and payload (or a marker)."""
    time_type = "LogAppendTime" if log_append_time else "CreateTime"
    header_keys = ",".join(map(printable_key, record.header_keys))
    line = (
        f"| offset: {record.offset} {time_type}: {record.timestamp} "
        f"keySize: {_size(record.key)} valueSize: {_size(record.value)} "
        f"sequence: {record.sequence} headerKeys: [{header_keys}]"
    )
    if record.marker is not None:
        return f"{line} endTxnMarker: {record.marker[0]} coordinatorEpoch: {record.marker[1]}"
    if data:
        return f"{line} key: {printable(record.key)} payload: {printable(record.value)}"
    return line


def printable_key(name: str) -> str:
    return printable(name.encode())


def _size(raw: bytes | None) -> int:
    return -1 if raw is None else len(raw)


def verdict_lines(verdict: LogVerdict, size_bytes: int, max_bytes: int | None) -> list[str]:
    """What is wrong with the file, if anything, after its batches."""
    lines = []
    if verdict.stop is not None:
        lines.append(f"Stopped at position {verdict.end_position}: {verdict.stop}")
    if verdict.limited:
        lines.append(
            f"Stopped at --max-bytes {max_bytes}: the {size_bytes - verdict.end_position} bytes "
            f"from position {verdict.end_position} were not read"
        )
    if verdict.recovery_error is not None:
        lines.append(
            f"Corrupt: recovery would truncate this segment to {verdict.valid_bytes} bytes: "
            f"{verdict.recovery_error}"
        )
    return lines


def batch_json(batch: BatchDump, *, deep: bool, data: bool) -> dict[str, Any]:
    """The batch line's facts, its problem, and with `deep` its records."""
    h = batch.header
    out: dict[str, Any] = {
        "position": batch.position,
        "baseOffset": h.base_offset,
        "lastOffset": h.last_offset,
        "count": h.record_count,
        "baseSequence": h.base_sequence,
        "lastSequence": batch.last_sequence,
        "producerId": h.producer_id,
        "producerEpoch": h.producer_epoch,
        "partitionLeaderEpoch": h.partition_leader_epoch,
        "isTransactional": h.is_transactional,
        "isControl": h.is_control,
        "timestampType": "LogAppendTime" if h.is_log_append_time else "CreateTime",
        "maxTimestamp": h.max_timestamp,
        "size": h.size_bytes,
        "magic": h.magic,
        "compression": batch.compression_name,
        "crcValid": batch.crc_valid,
        "problem": batch.problem,
    }
    if deep:
        out["recordsError"] = batch.records_error
        out["records"] = [_record_json(record, data=data) for record in batch.records or ()]
    return out


def _record_json(record: RecordDump, *, data: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "keySize": _size(record.key),
        "valueSize": _size(record.value),
        "sequence": record.sequence,
        "headerKeys": list(record.header_keys),
    }
    if record.marker is not None:
        out["endTxnMarker"], out["coordinatorEpoch"] = record.marker
    elif data:
        out["key"] = None if record.key is None else printable(record.key)
        out["payload"] = None if record.value is None else printable(record.value)
    return out


def verdict_json(verdict: LogVerdict) -> dict[str, Any]:
    return {
        "endPosition": verdict.end_position,
        "stop": verdict.stop,
        "limitedByMaxBytes": verdict.limited,
        "recoveryError": verdict.recovery_error,
        "validBytes": verdict.valid_bytes,
    }


def snapshot_lines(snapshot: ProducerSnapshot) -> list[str]:
    """One line per producer (Kafka's shape), one per kept batch, one per unsettled
    transaction."""
    lines = []
    for producer in snapshot_json(snapshot)["producers"]:
        batches = producer.pop("batches")
        lines.append(" ".join(f"{key}: {value}" for key, value in producer.items()))
        lines += ["| " + " ".join(f"{key}: {value}" for key, value in b.items()) for b in batches]
    for transaction in snapshot.unsettled:
        lines.append(
            f"unsettledTransaction producerId: {transaction.producer_id} "
            f"firstOffset: {transaction.first_offset} lastOffset: {transaction.last_offset}"
        )
    return lines


def snapshot_json(snapshot: ProducerSnapshot) -> dict[str, Any]:
    markers = {CONTROL_TYPE_ABORT: "ABORT", CONTROL_TYPE_COMMIT: "COMMIT"}
    producers = []
    for entry in snapshot.producers.entries():
        last = entry.batches[-1] if entry.batches else None
        producers.append(
            {
                "producerId": entry.producer_id,
                "producerEpoch": entry.producer_epoch,
                "lastSequence": -1 if last is None else last.last_sequence,
                "lastOffset": -1 if last is None else last.last_offset,
                "lastTimestamp": entry.last_timestamp,
                "currentTxnFirstOffset": entry.current_txn_first_offset,
                "lastAppendMs": entry.last_append_ms,
                "lastMarker": markers.get(entry.last_marker_type, "none"),
                "batches": [
                    {
                        "firstSequence": b.first_sequence,
                        "lastSequence": b.last_sequence,
                        "baseOffset": b.base_offset,
                        "lastOffset": b.last_offset,
                        "maxTimestamp": b.max_timestamp,
                    }
                    for b in entry.batches
                ],
            }
        )
    unsettled = [
        {"producerId": t.producer_id, "firstOffset": t.first_offset, "lastOffset": t.last_offset}
        for t in snapshot.unsettled
    ]
    return {"producers": producers, "unsettledTransactions": unsettled}

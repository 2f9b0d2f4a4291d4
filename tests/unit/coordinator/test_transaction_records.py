"""Goal: the `__transaction_state` record codec round-trips the metadata of every state, writes the
same bytes for the same metadata however it was built, turns DEAD into a tombstone, refuses every
malformed record with ValueError (never another exception: these bytes come from disk), and
`replay` lets later records win and tombstones forget.

Method: hand-built metadata per state encoded and decoded back; hand-made malformed values (each
breaking one rule) and hypothesis-generated garbage bytes fed to `decode`; small logs replayed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.services.coordinator import transaction_records as records
from samsa.services.coordinator.transaction_model import (
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    TransactionMetadata,
    TransactionState,
)
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transaction_records_pb2 as t

PARTITIONS = frozenset({("b", 2), ("a", 1), ("a", 0), ("c", 7)})

EVERY_STATE = [
    TransactionMetadata("x", 5, 0, 60_000, EMPTY, 10),
    TransactionMetadata("x", 5, 3, 60_000, ONGOING, 11, PARTITIONS, 9, 5, 2),
    TransactionMetadata("x", 5, 4, 60_000, PREPARE_COMMIT, 12, PARTITIONS, 9, 5, 3),
    TransactionMetadata("x", 5, 32767, 60_000, PREPARE_ABORT, 12, PARTITIONS, 9, 5, 32766, 77),
    TransactionMetadata("x", 77, 0, 60_000, COMPLETE_COMMIT, 13, previous_producer_id=5),
    TransactionMetadata("x", 5, 4, 60_000, TransactionState.COMPLETE_ABORT, 13),
    TransactionMetadata("x", 5, 4, 60_000, PREPARE_EPOCH_FENCE, 12, PARTITIONS, 9, 5, -1),
]


def test_the_python_states_are_the_proto_states() -> None:
    proto_names = {
        name.removeprefix("TRANSACTION_STATE_"): number
        for name, number in t.TransactionState.items()
        if number != t.TRANSACTION_STATE_UNSPECIFIED
    }
    assert proto_names == {state.name: state.value for state in TransactionState}


@pytest.mark.parametrize("metadata", EVERY_STATE, ids=lambda md: md.state.name)
def test_every_state_round_trips(metadata: TransactionMetadata) -> None:
    key, value = records.encode(metadata)
    assert value is not None
    assert records.decode(key, value) == ("x", metadata)
    assert records.encode(records.decode(key, value)[1]) == (key, value)  # type: ignore[arg-type]


def test_equal_metadata_is_equal_bytes() -> None:
    forwards = EVERY_STATE[1]
    backwards = TransactionMetadata(
        "x", 5, 3, 60_000, ONGOING, 11, frozenset(sorted(PARTITIONS, reverse=True)), 9, 5, 2
    )
    assert records.encode(forwards) == records.encode(backwards)
    value = t.TransactionRecordValue.FromString(records.encode(forwards)[1] or b"")
    assert [(entry.topic, list(entry.partitions)) for entry in value.partitions] == [
        ("a", [0, 1]),
        ("b", [2]),
        ("c", [7]),
    ]


def test_dead_is_a_tombstone() -> None:
    dead = TransactionMetadata("x", 5, 4, 60_000, DEAD, 20)
    key, value = records.encode(dead)
    assert value is None
    assert key == records.encode(EVERY_STATE[0])[0]
    assert records.decode(key, None) == ("x", None)


def _value(**changes: object) -> bytes:
    fields: dict[str, object] = {
        "producer_id": 5,
        "producer_epoch": 3,
        "previous_producer_id": -1,
        "previous_producer_epoch": -1,
        "next_producer_id": -1,
        "transaction_timeout_ms": 60_000,
        "state": t.TRANSACTION_STATE_ONGOING,
        "partitions": [c.TopicPartitions(topic="a", partitions=[0])],
        "transaction_start_ms": 9,
        "last_update_ms": 10,
    }
    fields.update(changes)
    return t.TransactionRecordValue(**fields).SerializeToString(deterministic=True)  # type: ignore[arg-type]


KEY = records.encode_key("x")


def test_the_reference_value_decodes() -> None:
    _, metadata = records.decode(KEY, _value())
    assert metadata is not None
    assert (metadata.state, metadata.partitions) == (ONGOING, frozenset({("a", 0)}))


MALFORMED_VALUES = {
    "unspecified state": _value(state=t.TRANSACTION_STATE_UNSPECIFIED),
    "dead in a value": _value(state=t.TRANSACTION_STATE_DEAD, partitions=[]),
    "unknown state": _value(state=99),
    "negative producer id": _value(producer_id=-1),
    "epoch above the max": _value(producer_epoch=32768),
    "negative epoch": _value(producer_epoch=-1),
    "previous id below -1": _value(previous_producer_id=-2),
    "previous epoch below -1": _value(previous_producer_epoch=-2),
    "next id below -1": _value(next_producer_id=-2),
    "next id outside a prepare": _value(next_producer_id=8),
    "zero timeout": _value(transaction_timeout_ms=0),
    "ongoing without partitions": _value(partitions=[]),
    "empty with partitions": _value(state=t.TRANSACTION_STATE_EMPTY, transaction_start_ms=-1),
    "ongoing without a start": _value(transaction_start_ms=-1),
    "complete with a start": _value(state=t.TRANSACTION_STATE_COMPLETE_ABORT, partitions=[]),
    "empty topic": _value(partitions=[c.TopicPartitions(topic="", partitions=[0])]),
    "negative partition": _value(partitions=[c.TopicPartitions(topic="a", partitions=[-1])]),
    "duplicate partition": _value(
        partitions=[
            c.TopicPartitions(topic="a", partitions=[0]),
            c.TopicPartitions(topic="a", partitions=[0]),
        ]
    ),
    "garbage": b"\xff\xff\xff",
}


@pytest.mark.parametrize("value", MALFORMED_VALUES.values(), ids=MALFORMED_VALUES.keys())
def test_malformed_values_are_refused(value: bytes) -> None:
    with pytest.raises(ValueError, match="transaction record"):
        records.decode(KEY, value)


@pytest.mark.parametrize("key", [b"\xff\xff", b"", t.TransactionRecordKey().SerializeToString()])
def test_malformed_keys_are_refused(key: bytes) -> None:
    for value in (None, _value()):
        with pytest.raises(ValueError, match="transaction record key"):
            records.decode(key, value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=128)))
def test_garbage_decodes_or_is_refused_with_value_error(key: bytes, value: bytes | None) -> None:
    try:
        transactional_id, metadata = records.decode(key, value)
    except ValueError:
        return
    assert transactional_id
    if metadata is not None:
        assert records.decode(*records.encode(metadata)) == (transactional_id, metadata)


def test_replay_lets_later_records_win_and_tombstones_forget() -> None:
    first = TransactionMetadata("x", 5, 0, 60_000, EMPTY, 10)
    second = TransactionMetadata("x", 5, 1, 60_000, EMPTY, 11)
    other = TransactionMetadata("y", 6, 0, 60_000, EMPTY, 12)
    dead = TransactionMetadata("x", 5, 1, 60_000, DEAD, 13)
    reborn = TransactionMetadata("x", 9, 0, 60_000, EMPTY, 14)
    log = [records.encode(md) for md in (first, other, second)]
    assert records.replay(log) == {"x": second, "y": other}
    log.append(records.encode(dead))
    assert records.replay(log) == {"y": other}
    log.append(records.encode(reborn))
    assert records.replay(log) == {"x": reborn, "y": other}


def test_replay_of_a_compacted_tombstone_is_a_no_op() -> None:
    assert records.replay([(records.encode_key("gone"), None)]) == {}


def test_replay_stops_at_a_malformed_record() -> None:
    log = [records.encode(EVERY_STATE[0]), (KEY, b"\xff\xff\xff")]
    with pytest.raises(ValueError, match="does not parse"):
        records.replay(log)


def test_writer_epoch_records_are_recognised_and_hold_no_state() -> None:
    fence = records.encode_writer_epoch(3, 7)
    assert records.is_writer_epoch(fence[0])
    assert not records.is_writer_epoch(KEY)
    assert not records.is_writer_epoch(b"\xff\xff")
    first = TransactionMetadata("x", 5, 0, 60_000, EMPTY, 10)
    log = [fence, records.encode(first), records.encode_writer_epoch(4, 8)]
    assert records.replay(log) == {"x": first}
    with pytest.raises(ValueError, match="empty transactional id"):
        records.decode(*fence)  # decode is for transaction records only: callers check first

"""Goal: a compacted topic's leader refuses a record without a key, as Kafka's does
(LogValidator: INVALID_RECORD, "Compacted topic cannot accept message without key"): compaction
keeps the newest record of each key, and a keyless record has none. The whole append is refused
and nothing is stored; markers, followers (the leader checked) and topics whose cleanup.policy is
delete are not held to it, and a policy changed at runtime applies from the next append.

Method: appends to a real Log on disk (log_helpers' small segments).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import batch, file_bytes, read_all, small_config, txn_append, txn_marker

from samsa.common.errors import ErrorCode, InvalidRecordError
from samsa.common.record.codec import CONTROL_TYPE_COMMIT
from samsa.common.record.header import COMPRESSION_ZSTD
from samsa.services.broker.log.log import Log

COMPACT = frozenset({"compact"})


def append(log: Log, data: bytes) -> int:
    return log.append_as_leader(data, leader_epoch=0, now_ms=1).first_offset


@pytest.mark.parametrize("policy", [COMPACT, frozenset({"compact", "delete"})])
def test_a_keyless_record_is_refused_whole_and_nothing_is_stored(
    tmp_path: Path, policy: frozenset[str]
) -> None:
    log = Log.open(tmp_path, small_config(cleanup_policy=policy), now_ms=0)
    append(log, batch(b"first", keys=[b"a"]))
    before = file_bytes(log.directory)
    keyed = batch(b"keyed", keys=[b"b"])
    keyless = batch(b"x", b"y", keys=[b"c", None], compression=COMPRESSION_ZSTD)
    with pytest.raises(InvalidRecordError) as refused:
        append(log, keyed + keyless)  # two batches: the first is not stored either
    assert refused.value.code is ErrorCode.INVALID_RECORD
    message = str(refused.value)
    assert "batch at position" in message and "record 1 has a null key" in message
    assert "cleanup.policy" in message
    assert file_bytes(log.directory) == before
    assert log.log_end_offset == 1
    assert append(log, keyed) == 1
    assert append(log, batch(b"empty key", keys=[b""])) == 2, "an empty key is a key"


def test_a_delete_topic_takes_keyless_records(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    assert append(log, batch(b"x", keys=[None])) == 0


def test_markers_and_keyed_transactions_pass_keyless_transactional_records_do_not(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path, small_config(cleanup_policy=COMPACT), now_ms=0)
    fields = {"producer_id": 5, "producer_epoch": 0, "transactional": True}
    with pytest.raises(InvalidRecordError, match="null key"):
        txn_append(log, batch(b"x", keys=[None], base_sequence=0, **fields))
    assert txn_append(log, batch(b"x", keys=[b"k"], base_sequence=0, **fields)) == 0
    assert txn_append(log, txn_marker(CONTROL_TYPE_COMMIT, 5)) == 1


def test_a_follower_stores_keyless_records_its_leader_stored(tmp_path: Path) -> None:
    """Written while the topic's cleanup.policy was delete, then replicated after it changed."""
    leader = Log.open(tmp_path / "leader", small_config(), now_ms=0)
    append(leader, batch(b"x", keys=[None]))
    follower = Log.open(tmp_path / "follower", small_config(cleanup_policy=COMPACT), now_ms=0)
    follower.append_as_follower(leader.read(0, 10_000).records, now_ms=1)
    assert [(r.key, r.value) for r in read_all(follower)] == [(None, b"x")]


def test_a_policy_changed_at_runtime_holds_from_the_next_append(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(), now_ms=0)
    assert append(log, batch(b"x", keys=[None])) == 0
    log.reconfigure(small_config(cleanup_policy=COMPACT))
    with pytest.raises(InvalidRecordError):
        append(log, batch(b"y", keys=[None]))
    log.reconfigure(small_config())
    assert append(log, batch(b"y", keys=[None])) == 1

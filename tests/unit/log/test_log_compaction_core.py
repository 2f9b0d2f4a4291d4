"""Goal: the pure compaction step keeps exactly the newest record per key, drops keyless records
(as Kafka's cleaner does: a topic made compact at runtime holds some; a batch kept whole keeps
its own), drops expired tombstones and aborted transactions, compacts committed transactions
like plain records, keeps every surviving record's offset and every batch field, and leaves
batches it cannot clean untouched; a COMMIT marker goes only once its transaction is empty,
delete.retention.ms old and not its producer's last batch, an ABORT marker never.

Method: batches built by the codec, compacted with a key map, decoded again and compared record by
record; "untouched" means the very same bytes object comes back.
"""

from __future__ import annotations

from collections.abc import Container

from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
    decode_batch,
)
from samsa.services.broker.log.compaction import (
    AbortedRanges,
    CleaningRules,
    RemovableMarkers,
    build_key_map,
    compact_batch,
)
from samsa.services.broker.log.delete_horizon import FirstCleaned
from samsa.services.broker.log.transaction_index import AbortedTransaction


def test_key_map_keeps_the_newest_offset_and_ignores_control_keyless_and_aborted() -> None:
    batches = [
        decode_batch(build_batch([b"1", b"2", b"3"], keys=[b"a", None, b"b"], base_offset=0)),
        decode_batch(build_batch([b"4"], keys=[b"a"], base_offset=3)),
        decode_batch(
            build_batch(
                [b"5"],
                keys=[b"b"],
                base_offset=4,
                transactional=True,
                producer_id=1,
                producer_epoch=0,
            )
        ),
        decode_batch(
            build_control_batch(
                1, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0, base_offset=5
            )
        ),
    ]
    assert build_key_map(batches) == {b"a": 3, b"b": 4}, "a committed transaction's key counts"
    aborted = AbortedRanges([AbortedTransaction(1, 4, 5, 4)])
    assert build_key_map(batches, aborted) == {b"a": 3, b"b": 2}, "an aborted one's does not"


def compact(
    raw: bytes,
    key_map: dict[bytes, int],
    *,
    now_ms: int = 0,
    delete_retention_ms: int = 100,
    aborted: AbortedRanges | None = None,
    removed_markers: Container[int] = (),
    first_cleaned: FirstCleaned | None = None,
    keep_whole: Container[int] = (),
) -> bytes | None:
    rules = CleaningRules(
        key_map,
        now_ms,
        delete_retention_ms,
        keep_whole=keep_whole,
        aborted=aborted or AbortedRanges(),
        removed_markers=removed_markers,
        first_cleaned=first_cleaned or FirstCleaned(),
    )
    return compact_batch(raw, decode_batch(raw), rules)


def test_a_fully_live_batch_comes_back_as_the_same_bytes() -> None:
    raw = build_batch([b"1", b"2"], keys=[b"a", b""], base_offset=10)
    assert compact(raw, {b"a": 10, b"": 11}) is raw, "an empty key is a key"


def test_keyless_records_are_dropped_unless_the_batch_is_kept_whole() -> None:
    """Written before the topic's cleanup.policy became compact (its leader refuses them since):
    Kafka's cleaner drops them. A live idempotent producer's newest batch stays whole."""
    raw = build_batch([b"1", b"2", b"3"], keys=[None, b"a", None], base_offset=10)
    out = compact(raw, {b"a": 11})
    assert out is not None
    assert [(r.offset, r.key) for r in decode_batch(out)] == [(11, b"a")]
    keyless = build_batch([b"1", None], keys=[None, None], base_offset=20)
    assert compact(keyless, {}) is None, "a keyless tombstone goes too"
    assert compact(keyless, {}, keep_whole={20}) is keyless
    committed = build_batch(
        [b"x", b"y"],
        keys=[None, b"b"],
        base_offset=30,
        producer_id=4,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    out = compact(committed, {b"b": 31})
    assert out is not None
    assert [(r.offset, r.key) for r in decode_batch(out)] == [(31, b"b")]
    assert decode_batch(out).header.is_transactional


def test_a_fully_dead_batch_is_dropped() -> None:
    raw = build_batch([b"1", b"2"], keys=[b"a", b"b"], base_offset=10)
    assert compact(raw, {b"a": 50, b"b": 51}) is None


def test_survivors_keep_offsets_timestamps_headers_and_batch_fields() -> None:
    raw = build_batch(
        [b"old", b"keep", b"gone", b"last"],
        keys=[b"a", b"b", b"a", b"c"],
        timestamps=[5, 6, 7, 8],
        headers=[[], [("trace", b"t")], [], []],
        base_offset=100,
        partition_leader_epoch=3,
        producer_id=9,
        producer_epoch=2,
        base_sequence=40,
    )
    out = compact(raw, {b"a": 200, b"b": 101, b"c": 103})
    assert out is not None
    batch = decode_batch(out)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch] == [
        (101, 6, b"b", b"keep", (("trace", b"t"),)),
        (103, 8, b"c", b"last", ()),
    ]
    header = batch.header
    assert (header.base_offset, header.last_offset) == (100, 103), "the last offset is kept"
    assert (header.partition_leader_epoch, header.producer_id) == (3, 9)
    assert (header.producer_epoch, header.base_sequence) == (2, 40)


def test_tombstones_expire_delete_retention_ms_after_their_first_pass() -> None:
    """Counted from the pass that first cleaned the batch (offsets below 2 at 1_000), never
    from the record timestamp (0 here), and never in the first pass itself."""
    raw = build_batch([None, b"v"], keys=[b"dead", b"live"], timestamps=[0, 0])
    key_map = {b"dead": 0, b"live": 1}
    assert compact(raw, key_map, now_ms=5_000) is raw, "its first pass keeps it"
    first_cleaned = FirstCleaned([(2, 1_000)])
    assert compact(raw, key_map, now_ms=1_099, first_cleaned=first_cleaned) is raw
    out = compact(raw, key_map, now_ms=1_100, first_cleaned=first_cleaned)
    assert out is not None
    assert [(r.offset, r.key) for r in decode_batch(out)] == [(1, b"live")]


def test_markers_are_kept_aborted_transactions_removed_and_committed_ones_compacted() -> None:
    marker = build_control_batch(
        0, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0, base_offset=9
    )
    assert compact(marker, {}) is marker
    transactional = build_batch(
        [b"x", b"y"],
        keys=[b"a", b"b"],
        transactional=True,
        producer_id=1,
        producer_epoch=0,
        base_sequence=7,
        base_offset=5,
    )
    aborted = AbortedRanges([AbortedTransaction(1, 5, 9, 5)])
    assert compact(transactional, {b"a": 5, b"b": 6}, aborted=aborted) is None, "aborted: gone"
    other_producer = AbortedRanges([AbortedTransaction(2, 5, 9, 5)])
    assert compact(transactional, {b"a": 5, b"b": 6}, aborted=other_producer) is transactional
    earlier = AbortedRanges([AbortedTransaction(1, 0, 4, 0)])
    out = compact(transactional, {b"a": 99, b"b": 6}, aborted=earlier)
    assert out is not None, "committed: compacted like any batch"
    kept = decode_batch(out)
    assert [(r.offset, r.key) for r in kept] == [(6, b"b")]
    assert kept.header.is_transactional and kept.header.producer_id == 1
    assert kept.header.base_sequence == 7 and kept.header.base_offset == 5


def commit_or_abort(kind: int, pid: int, offset: int, timestamp: int) -> bytes:
    return build_control_batch(
        kind,
        producer_id=pid,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=timestamp,
        base_offset=offset,
    )


def data(pid: int, offset: int) -> bytes:
    return build_batch(
        [b"x"],
        keys=[b"k"],
        transactional=True,
        producer_id=pid,
        producer_epoch=0,
        base_offset=offset,
    )


def test_a_commit_marker_goes_when_its_transaction_is_empty_old_and_not_its_producers_last():
    log = [
        data(1, 0),
        commit_or_abort(CONTROL_TYPE_COMMIT, 1, 1, 1_000),  # its transaction has a record
        commit_or_abort(CONTROL_TYPE_COMMIT, 1, 2, 1_000),  # empty: an earlier pass emptied it
        commit_or_abort(CONTROL_TYPE_ABORT, 1, 3, 1_000),  # empty, but an ABORT
        data(2, 4),  # another producer's record is not this transaction's
        commit_or_abort(CONTROL_TYPE_COMMIT, 1, 5, 2_000),  # empty, newer
        commit_or_abort(CONTROL_TYPE_COMMIT, 1, 6, 1_000),  # empty, producer 1's last here
    ]

    def removable(now_ms: int, later: bool = False) -> set[int]:
        markers = RemovableMarkers(now_ms=now_ms, delete_retention_ms=100)
        for raw in [*log, data(1, 7)] if later else log:
            markers.see(decode_batch(raw))
        return markers.offsets()

    assert removable(1_099) == set(), "none is delete.retention.ms old yet"
    assert removable(1_100) == {2}, "6 is its producer's last batch in the cleanable range"
    assert removable(1_100, later=True) == {2, 6}
    assert removable(2_100, later=True) == {2, 5, 6}


def test_a_removed_marker_is_dropped_and_others_kept() -> None:
    marker = commit_or_abort(CONTROL_TYPE_COMMIT, 1, 9, 0)
    assert compact(marker, {}, removed_markers={9}) is None
    assert compact(marker, {}, removed_markers={8}) is marker

"""Goal: a batch the broker finds too large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE) is split
as Kafka's producer splits it, instead of failing every record: it goes on in pieces of half as
many records, each alone, in order, with the sequences the batch had (gap-free: the broker wrote
none of it), a split counting no retry; each acked piece settles its records with its own
offsets. A single record too large fails with its size and what to raise. An answer for several
batches of one partition cannot say which was too large: each goes again, alone.

Method: scenario tests on a RecordAccumulator (accumulator_helpers.py); the test plays the
driver's part (drains, acks, failures) with plain numbers for time, and decodes what each
attempt would have sent.
"""

from __future__ import annotations

from accumulator_helpers import LEADERS, VALUE, append, batch_size_for, drain_all, make, values_of

from samsa.client.producer_batch import Completed
from samsa.common.errors import ErrorCode
from samsa.common.record import codec

TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE


def sent(batch) -> tuple[int, list[bytes | None]]:  # type: ignore[no-untyped-def]
    """(base sequence, values) of what the attempt carries."""
    decoded = codec.decode_batch(batch.encoded)
    return decoded.header.base_sequence, decoded.values


def values(count: int, start: int = 0) -> list[bytes]:
    """Records of VALUE's size, so that batch_size_for() counts them."""
    return [b"record-%03d" % n for n in range(start, start + count)]


def test_a_too_large_batch_goes_on_in_pieces_in_order_with_its_sequences() -> None:
    accumulator = make(batch_size=batch_size_for(8))
    for value in values(8):
        append(accumulator, value=value)
    (batch,) = drain_all(accumulator, 0)
    assert sent(batch) == (0, values(8))
    assert accumulator.on_batch_failed(batch.batch_id, TOO_LARGE, False, 1) == []
    accumulator.check_invariants()

    (piece,) = drain_all(accumulator, 1)  # at once: no backoff
    assert piece is batch and sent(piece) == (0, values(4))
    (first,) = accumulator.on_batch_acked(piece.batch_id, 100)
    assert first == Completed(batch.batch_id, "t", 0, 4, 100, -1, ErrorCode.NONE, "", 0, False)
    accumulator.check_invariants()

    (piece,) = drain_all(accumulator, 2)
    assert sent(piece) == (4, values(4, 4))
    (last,) = accumulator.on_batch_acked(piece.batch_id, 200)
    assert last == Completed(batch.batch_id, "t", 0, 4, 200, -1, ErrorCode.NONE, "", 4, True)
    assert accumulator.batch_splits == 1 and accumulator.buffered_bytes == 0

    append(accumulator)  # the partition's sequences run on from the batch's
    (after,) = drain_all(accumulator, 3)
    assert sent(after)[0] == 8


def test_pieces_halve_until_they_pass_then_grow_again() -> None:
    accumulator = make(batch_size=batch_size_for(8), retries=1)  # a split counts no retry
    for value in values(8):
        append(accumulator, value=value)
    sizes = []
    now_ms = 0
    while accumulator.has_unfinished():
        now_ms += 1
        (piece,) = drain_all(accumulator, now_ms)
        carried = len(sent(piece)[1])
        sizes.append(carried)
        if carried > 2:  # the broker takes at most 2 of these records in a batch
            assert accumulator.on_batch_failed(piece.batch_id, TOO_LARGE, False, now_ms) == []
        else:
            accumulator.on_batch_acked(piece.batch_id, now_ms)
        accumulator.check_invariants()
    assert sizes == [8, 4, 2, 4, 2, 4, 2, 2]


def test_batches_behind_the_split_one_wait_and_keep_their_sequences() -> None:
    """The next batch of the partition, in flight in another request, is refused behind the
    split one (OUT_OF_ORDER_SEQUENCE): it goes after every piece, with its sequence."""
    accumulator = make(batch_size=batch_size_for(4), retry_backoff_ms=0)
    for value in values(6):
        append(accumulator, value=value)
    big = drain_all(accumulator, 0, max_request_bytes=1)[0]  # one batch per request
    (behind,) = drain_all(accumulator, 0, max_request_bytes=1)
    assert (sent(big)[0], sent(behind)[0]) == (0, 4)
    accumulator.on_batch_failed(big.batch_id, TOO_LARGE, False, 1)
    assert drain_all(accumulator, 1) == []  # the piece waits for `behind`'s outcome
    accumulator.on_batch_failed(behind.batch_id, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, False, 2)
    order = []
    for now_ms in range(3, 6):
        (attempt,) = drain_all(accumulator, now_ms)  # alone, one at a time
        order.append(sent(attempt))
        accumulator.on_batch_acked(attempt.batch_id, now_ms)
    assert order == [(0, values(2)), (2, values(2, 2)), (4, values(2, 4))]
    assert not accumulator.ready(6, LEADERS).producer_id_required


def test_a_single_record_too_large_fails_with_its_size() -> None:
    accumulator = make(max_request_size=1_000_000)
    append(accumulator, value=b"x" * 500)
    (batch,) = drain_all(accumulator, 0)
    size = len(batch.encoded or b"")
    (failed,) = accumulator.on_batch_failed(batch.batch_id, TOO_LARGE, False, 1)
    assert failed.error_code is TOO_LARGE and failed.batch_done
    assert failed.error_message == (
        f"MESSAGE_TOO_LARGE for t-0: the record is {size} bytes in a batch "
        "of its own, within max.request.size (1000000) but over the broker's limit for the "
        "topic (max.message.bytes): raise the topic's max.message.bytes or send a smaller record"
    )


def test_an_oversize_record_fails_alone_and_the_rest_go_on_in_a_new_epoch() -> None:
    """Pieces isolate the record the broker refuses; it fails, the others are written in
    order. Its sequence was never written, so the next ones would leave a gap: the partition
    moves to a new epoch and numbers them from 0, as after any failed sequenced batch."""
    accumulator = make(batch_size=batch_size_for(4) + 500)
    batch_values = [VALUE, b"x" * 500, VALUE, VALUE]
    for value in batch_values:
        append(accumulator, value=value)
    outcomes: list[Completed] = []
    written: list[tuple[int, int, int]] = []  # (epoch, base sequence, records) acked
    now_ms = 0
    while accumulator.has_unfinished():
        now_ms += 1
        ready = accumulator.ready(now_ms, LEADERS)
        if ready.producer_id_required:
            accumulator.set_producer_id(1000, 1)
        (piece,) = drain_all(accumulator, now_ms)
        header = codec.decode_batch(piece.encoded).header
        if b"x" * 500 not in sent(piece)[1]:
            written.append((header.producer_epoch, header.base_sequence, header.record_count))
        if b"x" * 500 in sent(piece)[1]:
            outcomes += accumulator.on_batch_failed(piece.batch_id, TOO_LARGE, False, now_ms)
        else:
            outcomes += accumulator.on_batch_acked(piece.batch_id, now_ms)
        accumulator.check_invariants()
    per_record = [
        (done.first_index + n, done.error_code)
        for done in outcomes
        for n in range(done.record_count)
    ]
    ok = ErrorCode.NONE
    assert per_record == [(0, ok), (1, TOO_LARGE), (2, ok), (3, ok)]
    assert [done.batch_done for done in outcomes] == [False] * (len(outcomes) - 1) + [True]
    assert accumulator.producer_identity == (1000, 1)
    assert written == [(0, 0, 1), (1, 0, 1), (1, 1, 1)]  # gap-free in each epoch


def test_a_too_large_answer_for_several_batches_sends_each_again_alone() -> None:
    """Several batches of one partition in one request, refused together: which one is too
    large the answer cannot say, so none is split yet; each goes again, alone, in order."""
    accumulator = make(idempotent=False, batch_size=batch_size_for(2), retries=0)
    for value in values(4):
        append(accumulator, value=value)
    first, second = drain_all(accumulator, 0)
    for batch in (first, second):
        completed = accumulator.on_batch_failed(
            batch.batch_id, ErrorCode.RECORD_LIST_TOO_LARGE, False, 1, alone=False
        )
        assert completed == []
    for now_ms, expected in ((2, first), (3, second)):
        (again,) = drain_all(accumulator, now_ms)
        assert again is expected and len(sent(again)[1]) == 2
        (done,) = accumulator.on_batch_acked(again.batch_id, now_ms)
        assert done.batch_done and done.first_index == 0
    assert accumulator.batch_splits == 0


def test_a_split_batch_without_idempotence_keeps_no_sequence() -> None:
    accumulator = make(idempotent=False, batch_size=batch_size_for(2))
    for value in values(2):
        append(accumulator, value=value)
    (batch,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(batch.batch_id, TOO_LARGE, False, 1)
    for now_ms in (2, 3):
        (piece,) = drain_all(accumulator, now_ms)
        assert sent(piece)[0] == -1 and len(values_of(piece)) == 1
        accumulator.on_batch_acked(piece.batch_id, now_ms)
    assert not accumulator.has_unfinished()


def test_a_duplicate_answer_for_a_piece_settles_that_piece_only() -> None:
    """A piece written, its answer lost, its retry answered DUPLICATE_SEQUENCE_NUMBER: that
    proves the piece written, not the rest of the batch (the seeded simulation found the whole
    batch reported written)."""
    accumulator = make(batch_size=batch_size_for(4), retry_backoff_ms=0)
    for value in values(4):
        append(accumulator, value=value)
    (batch,) = drain_all(accumulator, 0)
    accumulator.on_batch_failed(batch.batch_id, TOO_LARGE, False, 1)
    (piece,) = drain_all(accumulator, 1)
    accumulator.on_batch_failed(piece.batch_id, ErrorCode.NETWORK_EXCEPTION, True, 2)
    (retry,) = drain_all(accumulator, 3)
    assert sent(retry) == (0, values(2))  # the same piece, the same sequence
    duplicate = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    (written,) = accumulator.on_batch_failed(retry.batch_id, duplicate, False, 4)
    assert (written.first_index, written.record_count, written.batch_done) == (0, 2, False)
    assert written.error_code is ErrorCode.NONE
    (rest,) = drain_all(accumulator, 5)
    assert sent(rest) == (2, values(2, 2))

"""Goal: the records the transaction coordinator's state machine emits replay to the state it
held (what a failover relies on), whatever operations arrive, valid or not; only expected errors
come out, and a producer id's handed-out epoch never goes down.

Method: a hypothesis test driving random operations on a few transactional ids, writing every
record to an in-memory log of bytes, and checking after every step that replaying the log gives
the coordinator's map; the same driver over long seeded walks, which reach every state and epoch
exhaustion.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transaction_state_cases import NOW, TIMEOUT, E

from samsa.services.coordinator import transaction_records as records
from samsa.services.coordinator import transaction_state as s
from samsa.services.coordinator.transaction_model import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARED,
    PRODUCER_EPOCH_MAX,
    Outcome,
    TransactionMetadata,
    apply,
)

IDS = ["a", "b"]
EXPIRATION_MS = 10 * TIMEOUT
# Weighted (repeats) so that whole transactions, commits and epoch exhaustion happen often.
OPERATION_KINDS = [
    *["init"] * 2,
    *["add"] * 3,
    *["commit"] * 3,
    *["abort"] * 2,
    *["markers"] * 4,
    "stale_end",
    "retry",
    "tick",
    "expire",
]
OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(OPERATION_KINDS),
        st.sampled_from(IDS),
        st.integers(min_value=0, max_value=3),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(OPERATIONS, st.booleans())
def test_replaying_the_emitted_records_gives_the_same_metadata(
    operations: list[tuple[str, str, int]], near_exhaustion: bool
) -> None:
    """Random operations (valid and not) on two ids; after every step the replay of the log
    equals the coordinator's map."""
    _drive(operations, near_exhaustion, check_every=1)


@pytest.mark.parametrize("seed", range(8))
def test_a_long_seeded_walk_replays_to_the_same_metadata(seed: int) -> None:
    """The same driver over 500 seeded steps (hypothesis favours short runs): whole transactions,
    fences, timeouts, expiry and epoch exhaustion all happen, and the replay still matches."""
    rng = random.Random(seed)
    operations = [
        (rng.choice(OPERATION_KINDS), rng.choice(IDS), rng.randrange(4)) for _ in range(500)
    ]
    emitted = _drive(operations, near_exhaustion=seed % 2 == 1, check_every=25)
    reached = {md.state for md in emitted}
    assert {ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT} <= reached, (
        f"seed {seed} reached only {sorted(st.name for st in reached)}"
    )
    if seed % 2 == 1:
        rotations = [
            md
            for md in emitted
            if md.next_producer_id != -1 or md.previous_producer_id not in (-1, md.producer_id)
        ]
        assert rotations, f"seed {seed}: the epoch was never exhausted"


def _drive(
    operations: list[tuple[str, str, int]], near_exhaustion: bool, check_every: int
) -> list[TransactionMetadata]:
    """Run operations the way the coordinator will: every emitted metadata is encoded into an
    in-memory log, then applied; the producer of each id uses what it was last answered. Checks
    that the replay of the log equals the map (every `check_every` steps and at the end), that
    only expected errors come out, and that a producer id's handed-out epoch never goes down.
    Returns every emitted metadata."""
    log: list[tuple[bytes, bytes | None]] = []
    emitted: list[TransactionMetadata] = []
    transactions: dict[str, TransactionMetadata] = {}
    held: dict[str, tuple[int, int]] = {}  # what each id's producer was last answered
    now_ms = NOW
    next_producer_id = 1000
    if near_exhaustion:  # start every id one init away from the exhausted epoch
        for name in IDS:
            md = TransactionMetadata(name, 500 + len(transactions), 32765, TIMEOUT, EMPTY, now_ms)
            log.append(records.encode(md))
            apply(transactions, md)
            held[name] = (md.producer_id, md.producer_epoch)
    for step, (op, name, number) in enumerate(operations, start=1):
        now_ms += 1
        next_producer_id += 1
        outcomes = _step(op, name, number, transactions, held, now_ms, next_producer_id)
        if op == "tick":
            now_ms += TIMEOUT * number
        elif op == "expire":
            now_ms += EXPIRATION_MS * number // 2
        for outcome in outcomes:
            assert outcome.error in ANSWERABLE, outcome
            if outcome.metadata is not None:
                log.append(records.encode(outcome.metadata))
                emitted.append(outcome.metadata)
                apply(transactions, outcome.metadata)
            if outcome.error == E.NONE and op in ("init", "commit", "abort", "retry"):
                _check_handed_out(held.get(name), outcome)
                held[name] = (outcome.producer_id, outcome.producer_epoch)
        if step % check_every == 0:
            assert records.replay(log) == transactions, f"after step {step}"
    assert records.replay(log) == transactions
    return emitted


def _step(
    op: str,
    name: str,
    number: int,
    transactions: dict[str, TransactionMetadata],
    held: dict[str, tuple[int, int]],
    now_ms: int,
    new_id: int,
) -> list[Outcome]:
    current = transactions.get(name)
    producer_id, producer_epoch = held.get(name, (0, 0))
    if op == "init":
        return [s.init_producer_id(current, name, TIMEOUT, now_ms, new_id)]
    if op == "add":
        partitions = [("t", number), ("u", number % 2)]
        return [s.add_partitions(current, producer_id, producer_epoch, partitions, now_ms)]
    if op in ("commit", "abort"):
        txn_commit = op == "commit"
        return [s.end_transaction(current, producer_id, producer_epoch, txn_commit, now_ms, new_id)]
    if op == "stale_end" and producer_epoch > 0:
        stale_epoch = producer_epoch - 1
        return [s.end_transaction(current, producer_id, stale_epoch, number % 2 == 0, now_ms)]
    if op == "retry" and current is not None:
        previous = (current.previous_producer_id, current.previous_producer_epoch)
        return [s.end_transaction(current, *previous, number % 2 == 0, now_ms)]
    if op == "markers" and current is not None and current.state in PREPARED:
        return [s.markers_written(current, now_ms)]
    if op == "tick":
        later_ms = now_ms + TIMEOUT * number
        return [
            s.abort_timed_out(transactions[timed_out_id], later_ms)
            for timed_out_id in s.timed_out(transactions, later_ms)
        ]
    if op == "expire":
        later_ms = now_ms + EXPIRATION_MS * number // 2
        return [Outcome(metadata=md) for md in s.expired(transactions, later_ms, EXPIRATION_MS)]
    return []


ANSWERABLE = {
    E.NONE,
    E.CONCURRENT_TRANSACTIONS,
    E.INVALID_PRODUCER_ID_MAPPING,
    E.PRODUCER_FENCED,
    E.INVALID_TXN_STATE,
}


def _check_handed_out(before: tuple[int, int] | None, outcome: Outcome) -> None:
    assert 0 <= outcome.producer_epoch < PRODUCER_EPOCH_MAX
    if before is not None and before[0] == outcome.producer_id:
        assert outcome.producer_epoch >= before[1]

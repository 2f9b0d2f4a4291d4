"""The partition tells the log each move of its high watermark, and the log forgets then the
transactions whose marker the move passed (Kafka's ProducerStateManager.onHighWatermarkUpdated):
reading the last stable offset changes nothing.

Goal: with the list settled only by `on_high_watermark`, the LSO is what it was when each read
settled it, through appends, moves, truncations (above the high watermark, and below it as after
an unclean election, whose high watermark the partition then keeps within the log) and restarts,
clean or after a crash (a marker the high watermark has not passed holds the LSO across one:
the producer snapshots list it); and the log holds only the transactions still above the high
watermark.

Method: a real log on disk (tmp_path, 2 KiB segments) driven by a seeded walk, told each move
as HostedPartition tells it, against a model recomputed from the batches it holds: LSO =
min(high watermark, first offset of every open transaction and of every one whose marker is at
or above the high watermark). The LSO is read at the high watermark and at the log end (a
replica's ListOffsets reads at the log end, above the high watermark last told).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from log_helpers import small_config

from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
)
from samsa.services.broker.log.log import Log

NOW = 1_000_000
PRODUCERS = (1, 2, 3)


def append(log: Log, batch: bytes) -> int:
    return log.append_as_leader(
        batch, leader_epoch=0, now_ms=NOW, allow_control_batches=True, allow_transactional=True
    ).first_offset


@dataclass
class Model:
    """The batches the log holds: (base_offset, last_offset, producer_id, kind, epoch), kind
    'data' or 'marker'."""

    batches: list[tuple[int, int, int, str, int]] = field(default_factory=list)

    def transactions(self) -> list[tuple[int, int | None]]:
        """(first offset, marker offset or None while open) of every transaction."""
        opened: dict[int, int] = {}
        found: list[tuple[int, int | None]] = []
        for base, _, pid, kind, _ in self.batches:
            if kind == "data":
                opened.setdefault(pid, base)
            elif pid in opened:
                found.append((opened.pop(pid), base))
        return found + [(first, None) for first in opened.values()]

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(
            [high_watermark]
            + [
                first
                for first, marker_at in self.transactions()
                if marker_at is None or marker_at >= high_watermark
            ]
        )

    def unstable(self, high_watermark: int) -> int:
        """How many ended transactions the high watermark has not passed."""
        return sum(
            1
            for _, marker_at in self.transactions()
            if marker_at is not None and marker_at >= high_watermark
        )

    def producer(self, pid: int) -> tuple[int, int]:
        """(epoch, next sequence) of `pid` as the batches left say."""
        mine = [batch for batch in self.batches if batch[2] == pid]
        if not mine:
            return 0, 0
        sequence = 0
        for base, last, _, kind, _ in mine:
            sequence = sequence + last - base + 1 if kind == "data" else 0
        return mine[-1][4], sequence


@pytest.mark.parametrize("seed", range(8))
def test_the_lso_needs_no_pruning_read_through_moves_truncations_and_restarts(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    model = Model()
    state = {pid: (0, 0) for pid in PRODUCERS}  # producer -> (epoch, next sequence)
    high_watermark = 0
    told = True  # whether the log was told the high watermark since its last truncation
    for step in range(200):
        action = rng.random()
        pid = rng.choice(PRODUCERS)
        epoch, sequence = state[pid]
        if action < 0.4:
            count = rng.randint(1, 2)
            batch = build_batch(
                [os.urandom(40) for _ in range(count)],
                timestamps=NOW,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=sequence,
                transactional=True,
            )
            base = append(log, batch)
            model.batches.append((base, base + count - 1, pid, "data", epoch))
            state[pid] = (epoch, sequence + count)
        elif action < 0.6:
            kind = rng.choice([CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT])
            batch = build_control_batch(
                kind, producer_id=pid, producer_epoch=epoch + 1, coordinator_epoch=0, timestamp=NOW
            )
            base = append(log, batch)
            model.batches.append((base, base, pid, "marker", epoch + 1))
            state[pid] = (epoch + 1, 0)
        elif action < 0.85:
            high_watermark = rng.randint(high_watermark, log.log_end_offset)
            log.on_high_watermark(high_watermark)
            told = True
        elif action < 0.95 and model.batches:
            # A follower's truncation, above the high watermark or (unclean election) below
            # it; then the partition keeps its high watermark within the log and, as
            # HostedPartition.log_changed does, tells the log; the scrubber's repair does not.
            cut = rng.randrange(len(model.batches))
            log.truncate_to(model.batches[cut][0])
            del model.batches[cut:]
            state = {pid: model.producer(pid) for pid in PRODUCERS}
            high_watermark = min(high_watermark, log.log_end_offset)
            told = rng.random() < 0.7
            if told:
                log.on_high_watermark(high_watermark)
        else:
            # A restart: a clean close, or a crash (the log is opened again from its files
            # without one: the replay starts at a snapshot at or below the recovery point).
            # The log is opened with the partition's high watermark (PartitionHost._open), which
            # tells it again (HostedPartition.__post_init__).
            if rng.random() < 0.5:
                log.close()
            log = Log.open(tmp_path, small_config(), now_ms=NOW, high_watermark=high_watermark)
            log.on_high_watermark(high_watermark)
            told = True
        where = f"seed {seed}, step {step}"
        expected = model.last_stable_offset(high_watermark)
        assert log.last_stable_offset(high_watermark) == expected, where
        end = log.log_end_offset
        assert log.last_stable_offset(end) == model.last_stable_offset(end), where
        if told:
            assert log.unstable_transaction_count() == model.unstable(high_watermark), where
        else:  # settled by the partition's next move, and never counted by the LSO meanwhile
            assert log.unstable_transaction_count() >= model.unstable(high_watermark), where
    log.close()


def test_a_move_that_settles_nothing_keeps_the_list_and_truncation_drops_its_tail(
    tmp_path: Path,
) -> None:
    """The list is in marker order: a move below the oldest marker forgets nothing, a move past
    some markers forgets exactly those, and a truncation forgets those it cut (their
    transactions are open again and hold the LSO at their first offset)."""
    log = Log.open(tmp_path, small_config(), now_ms=NOW)
    firsts, markers = [], []
    for pid in PRODUCERS:
        firsts.append(
            append(
                log,
                build_batch(
                    [b"v"], producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True
                ),
            )
        )
        markers.append(
            append(
                log,
                build_control_batch(
                    CONTROL_TYPE_COMMIT,
                    producer_id=pid,
                    producer_epoch=1,
                    coordinator_epoch=0,
                    timestamp=NOW,
                ),
            )
        )
    log.on_high_watermark(markers[0])
    assert log.unstable_transaction_count() == 3
    log.on_high_watermark(markers[1])
    assert log.unstable_transaction_count() == 2
    assert log.last_stable_offset(markers[1]) == firsts[1]
    log.truncate_to(markers[2])
    log.on_high_watermark(markers[1])
    assert log.unstable_transaction_count() == 1
    assert log.last_stable_offset(markers[1]) == firsts[1]
    assert log.last_stable_offset(log.log_end_offset) == firsts[2]  # open again
    log.on_high_watermark(log.log_end_offset)
    assert log.unstable_transaction_count() == 0
    log.close()

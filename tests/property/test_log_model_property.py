"""Goal: under any sequence of appends, reads, truncations, DeleteRecords, compactions, changes of
cleanup.policy and clean or unclean reopens, the log serves exactly what a dumb in-memory model
says it holds: the same records at the same offsets, the same log start and end, the same
timestamp lookups.

Method: hypothesis draws a list of operations; each is applied to a real Log (small segments, so
rolls happen) and to the model — a list of batches, each a list of (offset, timestamp, key, value).
The model's compaction is the rule written out naively (newest record per key below the active
segment, keyless records dropped, tombstones dropped delete.retention.ms after the pass that first
cleaned them). While the log is compacted an append with a keyless record is refused
(INVALID_RECORD) and stores nothing; keyless records get in while cleanup.policy is delete.
After every operation the whole log is read back and compared. fsync is skipped: nothing here
simulates a power loss.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from samsa.common.errors import InvalidRecordError
from samsa.common.record.codec import build_batch, decode_batches
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log

CONFIG = LogConfig(
    segment_bytes=1024,
    index_interval_bytes=64,
    max_message_bytes=1024,
    cleanup_policy=frozenset({"compact", "delete"}),
    delete_retention_ms=500,
)
DELETE_CONFIG = dataclasses.replace(CONFIG, cleanup_policy=frozenset({"delete"}))
Record = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value

KEYS = st.sampled_from([None, b"a", b"b", b"c", b"d"])
VALUES = st.none() | st.sampled_from([0, 1, 100, 200]).map(lambda size: bytes([size % 256]) * size)
RECORD = st.tuples(st.integers(0, 1_000), KEYS, VALUES)
APPEND = st.tuples(st.just("append"), st.lists(RECORD, min_size=1, max_size=4))
OTHERS = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("delete_records"), st.floats(0, 1)),
    st.tuples(st.just("compact"), st.integers(0, 2_000)),
    st.tuples(st.just("compacted"), st.booleans()),  # cleanup.policy changed (AlterConfigs)
    st.tuples(st.just("reopen"), st.booleans()),
)
# Appends half the time, so that segments roll and compaction has closed segments to clean
# (one_of flattens its branches and counts a repeated one once: appends were a sixth).
OPERATIONS = st.booleans().flatmap(lambda append: APPEND if append else OTHERS)


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)


class Model:
    def __init__(self) -> None:
        self.batches: list[list[Record]] = []
        self.log_start_offset = 0
        self.compacted = True  # cleanup.policy includes compact
        # offset -> when the compaction pass that first cleaned it ran (a tombstone's horizon).
        self.first_cleaned: dict[int, int] = {}

    def records(self) -> list[Record]:
        return [r for b in self.batches for r in b if r[0] >= self.log_start_offset]

    def append(
        self, first_offset: int, items: list[tuple[int, bytes | None, bytes | None]]
    ) -> None:
        self.batches.append(
            [(first_offset + i, ts, key, value) for i, (ts, key, value) in enumerate(items)]
        )

    def truncate(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b[-1][0] < offset]

    def forget_cleaned_from(self, log_end_offset: int) -> None:
        """Offsets from the log end on are written again: new to the cleaner."""
        self.first_cleaned = {o: t for o, t in self.first_cleaned.items() if o < log_end_offset}

    def compact(self, cleanable_end: int, now_ms: int) -> None:
        if not self.compacted:
            return
        newest: dict[bytes, int] = {}
        for batch in self.batches:
            for offset, _, key, _ in batch:
                if key is not None and offset < cleanable_end:
                    newest[key] = offset
        compacted = []
        for batch in self.batches:
            if batch[0][0] >= cleanable_end:
                compacted.append(batch)
                continue
            first = self.first_cleaned.setdefault(batch[0][0], now_ms)
            for r in batch:
                self.first_cleaned.setdefault(r[0], first)
            expired = first + CONFIG.delete_retention_ms <= now_ms
            kept = [
                r
                for r in batch
                if r[2] is not None and newest[r[2]] == r[0] and not (r[3] is None and expired)
            ]
            if any(r[2] is None for r in batch):
                event("keyless records compacted away")
            if kept:
                compacted.append(kept)
        self.batches = compacted


def log_records(log: Log) -> list[Record]:
    records: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 700)
        assert result.next_offset > offset, f"no progress at {offset}"
        for batch in decode_batches(result.records):
            records.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
        offset = result.next_offset
    return [r for r in records if r[0] >= log.log_start_offset]


def check(log: Log, model: Model) -> None:
    expected = model.records()
    assert log_records(log) == expected
    assert log.log_start_offset == model.log_start_offset
    if model.batches:
        assert log.log_end_offset >= model.batches[-1][-1][0] + 1
    for probe in (0, 250, 500, 1_000):
        first = next(((r[0], r[1]) for r in expected if r[1] >= probe), None)
        assert log.offset_for_timestamp(probe) == first


def apply(log: Log, model: Model, operation: tuple, directory: Path) -> Log:
    kind, argument = operation
    if kind == "append":
        raw = build_batch(
            [value for _, _, value in argument],
            keys=[key for _, key, _ in argument],
            timestamps=[ts for ts, _, _ in argument],
        )
        if model.compacted and any(key is None for _, key, _ in argument):
            with pytest.raises(InvalidRecordError, match="null key"):
                log.append_as_leader(raw, leader_epoch=0, now_ms=0)
            return log
        info = log.append_as_leader(raw, leader_epoch=0, now_ms=0)
        model.append(info.first_offset, argument)
    elif kind == "truncate":
        offset = log.log_start_offset + int(argument * (log.log_end_offset - log.log_start_offset))
        log.truncate_to(offset)
        model.truncate(offset)
        # A batch straddling the offset goes whole, so the end may fall below it (and below the
        # log start, which then follows it down).
        assert log.log_end_offset <= max(offset, model.log_start_offset)
        model.log_start_offset = min(model.log_start_offset, log.log_end_offset)
        model.forget_cleaned_from(log.log_end_offset)
    elif kind == "delete_records":
        offset = log.log_start_offset + int(argument * (log.log_end_offset - log.log_start_offset))
        model.log_start_offset = log.delete_records(offset)
        assert model.log_start_offset == offset
    elif kind == "compact":
        cleanable_end = log.segments()[-1].base_offset
        log.compact(now_ms=argument, high_watermark=log.log_end_offset)
        model.compact(cleanable_end, argument)
    elif kind == "compacted":
        log.reconfigure(CONFIG if argument else DELETE_CONFIG)
        model.compacted = argument
    elif kind == "reopen":
        if argument:
            log.close()
        else:
            log._local_log.close()  # an unclean stop: descriptors closed, nothing else
        log = Log.open(directory, CONFIG if model.compacted else DELETE_CONFIG, now_ms=0)
    return log


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(compacted=st.booleans(), operations=st.lists(OPERATIONS, min_size=20, max_size=60))
def test_the_log_matches_a_dumb_model(
    no_fsync: None,
    tmp_path_factory: pytest.TempPathFactory,
    compacted: bool,
    operations: list[tuple],
) -> None:
    directory = tmp_path_factory.mktemp("log")
    log = Log.open(directory, CONFIG if compacted else DELETE_CONFIG, now_ms=0)
    model = Model()
    model.compacted = compacted
    most_segments = 1
    for operation in operations:
        log = apply(log, model, operation, directory)
        check(log, model)
        most_segments = max(most_segments, len(log.segments()))
    event(f"segments at most: {min(most_segments, 4)}{'+' * (most_segments > 3)}")

"""A read_committed reader shows exactly the committed and non-transactional records.

Goal: `AbortedTransactionFilter`, fed a fetch's batches and the aborted transactions the broker
lists for them, hides every record of an aborted transaction and every marker, and shows every
other record — whatever the interleaving of producers, transactions left open, and the offset
the fetch starts from. Under read_uncommitted (no aborted list) it hides markers only.

Method: hypothesis draws a log of producers' actions (transactional batches, COMMIT/ABORT
markers, plain batches); the log is built from real batch bytes (codec.build_batch,
build_control_batch). The fetch stops at the last stable offset and lists, as the broker does,
each aborted transaction whose marker is at or after the fetch's start and which begins below
its end; the expected records come from a model that knows each batch's fate. Plus
hand-picked cases.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.common.record.codec import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    build_batch,
    build_control_batch,
    decode_batch,
)
from samsa.common.record.transaction_filter import AbortedTransactionFilter

ABORT, COMMIT = CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT


def build_log(
    actions: list[tuple[str, int]],
) -> tuple[list[bytes], dict[int, str], list[tuple[int, int, int]]]:
    """The batches' bytes, each data offset's fate ('shown'/'hidden'; transactions still open
    at the end count as shown: a read_committed fetch never reaches them, see below), and the
    aborted transactions (producer id, first offset, marker offset)."""
    batches: list[bytes] = []
    fate: dict[int, str] = {}
    opened: dict[int, list[int]] = {}  # producer -> offsets of its open transaction
    aborted: list[tuple[int, int, int]] = []
    offset = 0
    for kind, pid in actions:
        if kind == "data":
            batches.append(
                build_batch(
                    [b"%d" % offset, b"%d" % (offset + 1)],
                    base_offset=offset,
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=0,
                    transactional=True,
                )
            )
            opened.setdefault(pid, []).extend([offset, offset + 1])
            offset += 2
        elif kind == "plain":
            batches.append(build_batch([b"%d" % offset], base_offset=offset))
            fate[offset] = "shown"
            offset += 1
        else:
            marker = ABORT if kind == "abort" else COMMIT
            batches.append(
                build_control_batch(
                    marker,
                    producer_id=pid,
                    producer_epoch=1,
                    coordinator_epoch=0,
                    timestamp=0,
                    base_offset=offset,
                )
            )
            offsets = opened.pop(pid, [])
            for record_offset in offsets:
                fate[record_offset] = "hidden" if marker == ABORT else "shown"
            if offsets and marker == ABORT:
                aborted.append((pid, offsets[0], offset))
            offset += 1
    for offsets in opened.values():
        for record_offset in offsets:
            fate[record_offset] = "open"
    return batches, fate, aborted


def read(batches: list[bytes], aborted: list[tuple[int, int]] | None, start: int) -> list[int]:
    """The offsets a reader shows, reading from `start` (whole batches, as fetched)."""
    visible = AbortedTransactionFilter(aborted or ())
    shown = []
    for data in batches:
        batch = decode_batch(data)
        if batch.header.last_offset < start:
            continue
        if visible.batch_is_visible(batch):
            shown += [offset for offset in batch.offsets() if offset >= start]
    return shown


actions = st.lists(
    st.tuples(st.sampled_from(["data", "data", "plain", "abort", "commit"]), st.integers(1, 3)),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(actions, st.integers(0, 80))
def test_read_committed_shows_exactly_the_committed_and_plain_records(actions, start):
    batches, fate, aborted = build_log(actions)
    # A read_committed fetch stops at the last stable offset: before the first open record.
    open_offsets = [offset for offset, what in fate.items() if what == "open"]
    stable = min(open_offsets) if open_offsets else 1 << 40
    fetched = [data for data in batches if decode_batch(data).header.last_offset < stable]
    listed = [(pid, first) for pid, first, marker in aborted if marker >= start and first < stable]
    expected = sorted(o for o, what in fate.items() if what == "shown" and start <= o < stable)
    assert read(fetched, listed, start) == expected


@settings(max_examples=200, deadline=None)
@given(actions)
def test_read_uncommitted_hides_markers_only(actions):
    batches, fate, _ = build_log(actions)
    assert read(batches, None, 0) == sorted(fate)


def test_a_producer_s_committed_transaction_after_its_aborted_one_is_shown():
    batches, _, aborted = build_log(
        [("data", 1), ("abort", 1), ("data", 1), ("commit", 1), ("plain", 2)]
    )
    listed = [(pid, first) for pid, first, _ in aborted]
    assert read(batches, listed, 0) == [3, 4, 6]


def test_interleaved_producers_and_an_abort_that_began_before_the_fetch():
    batches, _, aborted = build_log(
        [("data", 1), ("data", 2), ("data", 1), ("abort", 1), ("commit", 2)]
    )
    assert aborted == [(1, 0, 6)]
    # fetched from offset 4: producer 1's transaction began at 0, before the fetch
    assert read(batches, [(1, 0)], 4) == []
    assert read(batches, [(1, 0)], 0) == [2, 3]

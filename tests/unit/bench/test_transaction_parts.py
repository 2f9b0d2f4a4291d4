"""Goal: the table of where a transaction's time goes reports each step's median, and a ceiling of
records a transaction / (flush + EndTxn) that the issue's targets are read against beside plain
produce's rate; a failed measurement shows its reason instead of figures.

Method: `parts_of` on hand-made step times with known medians, and `parts_table` on hand-made
figures (no cluster: both are pure)."""

from __future__ import annotations

import pytest

from bench.tables import Target
from bench.transaction_parts import (
    CEILING,
    END_MS,
    FLUSH_MS,
    SEND_MS,
    TOTAL_MS,
    parts_of,
    parts_table,
)

TARGETS = {
    "txn@100": Target("txn@100 >= 50% of plain", "produce records/s", True, 0.5, "plain"),
    "txn@1000": Target("txn@1000 >= 85% of plain", "produce records/s", True, 0.85, "plain"),
}


def test_medians_of_each_step_and_the_ceiling_from_flush_and_end():
    parts = parts_of(
        send_s=[0.001, 0.003, 0.002],
        flush_s=[0.004, 0.001, 0.002],
        end_s=[0.002, 0.002, 0.009],
        per_txn=100,
    )
    assert parts[SEND_MS.key] == pytest.approx(2.0)
    assert parts[FLUSH_MS.key] == pytest.approx(2.0)
    assert parts[END_MS.key] == pytest.approx(2.0)
    # Totals per transaction: 7, 6 and 13 ms, median 7 (not the sum of the step medians, 6).
    assert parts[TOTAL_MS.key] == pytest.approx(7.0)
    # 100 records / (2 ms flush + 2 ms EndTxn): what the chain allows with free sends.
    assert parts[CEILING.key] == pytest.approx(25_000.0)


def test_the_targets_are_read_against_the_ceilings_beside_plain():
    results = {
        "txn@100": parts_of([0.0003], [0.0016], [0.0011], 100),  # ceiling 37,037/s
        "txn@1000": parts_of([0.002], [0.0002], [0.0002], 1000),  # ceiling 2,500,000/s
    }
    text = parts_table(results, {"records_per_s": 500_000.0}, TARGETS, 10)
    assert "10 transactions of each size" in text
    assert "37,037" in text and "500,000" in text
    assert "ceiling: txn@100 >= 50% of plain     missed (0.07x)" in text
    assert "met (5.00x)" in text  # the txn@1000 ceiling, 2.5 M/s over plain's 500 k/s


def test_a_failed_measurement_shows_its_reason_and_no_verdict():
    results = {"txn@100": "failed: no coordinator", "txn@1000": "failed: no coordinator"}
    text = parts_table(results, {"records_per_s": 500_000.0}, TARGETS, 10)
    assert "failed: no coordinator" in text or "see note 1" in text
    assert "met" not in text and "missed" not in text
    assert text.count("n/a") >= 2  # one verdict per size, each without a figure

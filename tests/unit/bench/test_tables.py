"""Goal: the benches' tables say what was measured — the right best peer per row (higher rate,
lower latency), ratios only between real figures, reasons that carry into their cells (long ones
as numbered notes) and columns that line up whatever the cells hold.

Method: the pure formatting functions run on hand-made figures with known answers.
"""

from __future__ import annotations

from bench import tables


def test_best_peer_is_the_higher_rate_and_the_lower_latency() -> None:
    row = {"samsa": 300_000.0, "jetstream": 43_000.0, "redis": 140_000.0}
    assert tables.best_peer(row, higher_is_better=True) == ("redis", 140_000.0)
    assert tables.best_peer(row, higher_is_better=False) == ("jetstream", 43_000.0)


def test_best_peer_ignores_samsa_and_missing_figures() -> None:
    row = {"samsa": 1e9, "samsa+zstd": 1e9, "jetstream": "failed: TimeoutError", "redis": 5.0}
    assert tables.best_peer(row, higher_is_better=True) == ("redis", 5.0)
    assert tables.best_peer({"samsa": 1.0, "jetstream": "n/a", "redis": "n/a"}, True) is None


def test_ratio_only_between_real_figures() -> None:
    assert tables.ratio(280_000.0, 140_000.0) == 2.0
    assert tables.ratio(tables.NOT_BUILT, 140_000.0) is None
    assert tables.ratio(1.0, None) is None
    assert tables.ratio(1.0, 0.0) is None


def test_cells_format_with_separators_or_carry_their_reason() -> None:
    assert tables.format_cell(1234567.8) == "1,234,568"
    assert tables.format_cell(12.345, decimals=1) == "12.3"
    assert tables.format_cell(tables.NOT_BUILT) == "n/a (not built)"
    assert tables.format_cell(None) == "n/a"
    assert tables.format_ratio(2.345) == "2.35x"
    assert tables.format_ratio(None) == "n/a"


def test_long_reasons_become_numbered_notes_under_the_table() -> None:
    rows = [
        (tables.P50, {"samsa": "failed: OSError: boom", "samsa+zstd": "failed: OSError: boom",
                  "jetstream": 1.0, "redis": "failed: ValueError: bad"}),
    ]  # fmt: skip
    lines = tables.format_table("t", rows).splitlines()
    assert lines[2].count("see note 1") == 2 and "see note 2" in lines[2]
    assert lines[3:] == ["  note 1: failed: OSError: boom", "  note 2: failed: ValueError: bad"]


def test_cell_of_takes_the_key_or_passes_the_reason_on() -> None:
    assert tables.cell_of({"records_per_s": 5.0}, "records_per_s") == 5.0
    assert tables.cell_of("failed: OSError", "records_per_s") == "failed: OSError"
    assert tables.cell_of({"mb_per_s": 1.0}, "records_per_s") == "n/a (no records_per_s)"


def test_table_has_a_column_per_system_and_ratios_against_the_named_best_peer() -> None:
    rows = [
        (tables.PRODUCE_RATE, {"samsa": 300_000.0, "samsa+zstd": 250_000.0,
                           "jetstream": 43_000.0, "redis": 150_000.0}),
        (tables.P99, {"samsa": 100.0, "samsa+zstd": tables.NOT_BUILT,
                  "jetstream": 200.0, "redis": 80.0}),
    ]  # fmt: skip
    text = tables.format_table("title line", rows)
    lines = text.splitlines()
    assert lines[0] == "title line"
    for name in ("samsa", "samsa+zstd", "jetstream", "redis", "samsa/best", "samsa+zstd/best"):
        assert name in lines[1]
    produce = lines[2]
    assert produce.startswith("produce records/s")
    assert "300,000" in produce and "43,000" in produce
    assert "2.00x (redis)" in produce and "1.67x (redis)" in produce
    latency = lines[3]
    assert "1.25x (redis)" in latency  # 100 µs over the lower peer's 80 µs
    assert "n/a (not built)" in latency
    assert latency.rstrip().endswith("n/a")  # no ratio for a Samsa column that was not built


def test_columns_line_up_whatever_the_cells_hold() -> None:
    rows = [
        (tables.PRODUCE_RATE, {name: tables.NOT_BUILT for name in tables.COLUMNS}),
        (tables.PRODUCE_MB, {"samsa": 1.0, "samsa+zstd": 2.0, "jetstream": 3.0, "redis": 4.0}),
    ]
    lines = tables.format_table("t", rows).splitlines()[1:]
    header = lines[0]
    for line in lines[1:]:
        # every column's right edge is where the header's is
        for name in tables.COLUMNS:
            edge = header.index(name) + len(name)
            assert line[edge - 1] != " ", (name, line)


def test_a_table_without_peers_has_no_ratio_and_widens_for_long_labels() -> None:
    long_label = tables.Metric("x", "a label longer than the default label width", False)
    text = tables.format_table("t", [(long_label, {"samsa": 1.0})], ("samsa",), ())
    header, row = text.splitlines()[1:]
    assert header.split() == ["samsa"]
    assert row.startswith(long_label.label + "  ")
    assert len(header) == len(row)

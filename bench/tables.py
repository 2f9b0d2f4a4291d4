"""The benchmarks' tables: a figure per system and row, Samsa over the best peer, verdicts
against targets — pure formatting over figures already measured (no I/O, no clock, no
subprocess), so that every table is tested on hand-made figures with known answers.

A cell is a figure, or the reason there is none ("n/a (not built)", "failed: …"); a reason too
long for its column moves to a numbered note under the table. A ratio is Samsa's figure over the
best peer's of the row: the higher rate, or the lower latency (for a latency, a ratio below 1
means Samsa is faster). The default columns are the cluster bench's (two Samsa runs, JetStream
and Redis); another bench passes its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Cell = float | str  # a measured figure, or why there is none ("n/a (not built)")

NOT_BUILT = "n/a (not built)"
SAMSA_COLUMNS = ("samsa", "samsa+zstd")
PEER_COLUMNS = ("jetstream", "redis")
COLUMNS = SAMSA_COLUMNS + PEER_COLUMNS
COLUMN_WIDTH = 17
RATIO_WIDTH = 21
LABEL_WIDTH = 25
TARGET_WIDTH = 33


@dataclass(frozen=True)
class Metric:
    """One row of a table: how its figures are shown and which way is better."""

    key: str  # the measurement's dict key: records_per_s, mb_per_s, p50_us, p99_us
    label: str
    higher_is_better: bool
    decimals: int = 0


PRODUCE_RATE = Metric("records_per_s", "produce records/s", True)
PRODUCE_MB = Metric("mb_per_s", "produce MB/s", True, 1)
CONSUME_RATE = Metric("records_per_s", "consume records/s", True)
CONSUME_MB = Metric("mb_per_s", "consume MB/s", True, 1)
P50 = Metric("p50_us", "p50 µs", False)
P99 = Metric("p99_us", "p99 µs", False)


def is_figure(cell: Cell | None) -> bool:
    return isinstance(cell, int | float) and not isinstance(cell, bool)


def best_peer(
    row: dict[str, Cell], higher_is_better: bool, peer_columns: tuple[str, ...] = PEER_COLUMNS
) -> tuple[str, float] | None:
    """The peer column with the best figure of the row, or None when no peer has one."""
    figures = [(name, row[name]) for name in peer_columns if is_figure(row.get(name))]
    if not figures:
        return None
    choose = max if higher_is_better else min
    return choose(figures, key=lambda item: item[1])  # type: ignore[return-value]


def ratio(value: Cell | None, best: float | None) -> float | None:
    """Samsa's figure over the best peer's; None when either is missing or the peer's is 0."""
    if not is_figure(value) or best is None or best == 0:
        return None
    return float(value) / best  # type: ignore[arg-type]


def format_cell(cell: Cell | None, decimals: int = 0) -> str:
    """A figure with thousands separators, or the reason there is none."""
    if cell is None:
        return "n/a"
    if isinstance(cell, str):
        return cell
    return f"{cell:,.{decimals}f}"


def format_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def format_table(
    title: str,
    rows: list[tuple[Metric, dict[str, Cell]]],
    samsa_columns: tuple[str, ...] = SAMSA_COLUMNS,
    peer_columns: tuple[str, ...] = PEER_COLUMNS,
) -> str:
    """One fixed-width table: a column per system, then Samsa over the best peer, per Samsa run.

    The best peer's name is shown beside each ratio so that a reader knows what it is against
    (with a single peer, the header names it instead; with none, there is no ratio). A reason
    too long for its column (a failure's message) becomes "see note N", and the notes follow the
    table, one per distinct reason. Long row labels widen the label column."""
    single_peer = len(peer_columns) == 1
    against = peer_columns[0] if single_peer else "best"
    ratio_headers = [f"{name}/{against}" for name in samsa_columns] if peer_columns else []
    ratio_width = max([RATIO_WIDTH, *(len(name) + 2 for name in ratio_headers)])
    label_width = max([LABEL_WIDTH, *(len(metric.label) + 2 for metric, _ in rows)])
    columns = samsa_columns + peer_columns
    header = f"{'':<{label_width}}" + "".join(f"{name:>{COLUMN_WIDTH}}" for name in columns)
    header += "".join(f"{name:>{ratio_width}}" for name in ratio_headers)
    lines = [title, header.rstrip()]
    notes: list[str] = []
    for metric, row in rows:
        line = f"{metric.label:<{label_width}}"
        for name in columns:
            text = format_cell(row.get(name), metric.decimals)
            if len(text) >= COLUMN_WIDTH:
                if text not in notes:
                    notes.append(text)
                text = f"see note {notes.index(text) + 1}"
            line += f"{text:>{COLUMN_WIDTH}}"
        best = best_peer(row, metric.higher_is_better, peer_columns)
        for name in samsa_columns if peer_columns else ():
            text = format_ratio(ratio(row.get(name), best[1] if best else None))
            if best and text != "n/a" and not single_peer:
                text += f" ({best[0]})"
            line += f"{text:>{ratio_width}}"
        lines.append(line.rstrip())
    lines += [f"  note {number}: {text}" for number, text in enumerate(notes, 1)]
    return "\n".join(lines)


Rows = list[tuple[Metric, dict[str, Cell]]]


@dataclass(frozen=True)
class Table:
    title: str
    rows: Rows
    samsa_columns: tuple[str, ...] = SAMSA_COLUMNS
    peer_columns: tuple[str, ...] = PEER_COLUMNS

    @property
    def text(self) -> str:
        return format_table(self.title, self.rows, self.samsa_columns, self.peer_columns)

    def row(self, label: str) -> dict[str, Cell]:
        return next((row for metric, row in self.rows if metric.label == label), {})


@dataclass(frozen=True)
class Target:
    """A goal an issue sets: Samsa's figure over a reference's, at least (or at most) a factor.
    `against` is a peer column, or "best" for the best peer of the row."""

    label: str
    row_label: str
    higher_is_better: bool
    factor: float
    against: str = "best"


def verdict(target: Target, row: dict[str, Cell], column: str) -> str:
    """ "met (2.96x)", "missed (1.20x)", or "n/a" when either figure is missing."""
    if target.against == "best":
        best = best_peer(row, target.higher_is_better)
        reference = best[1] if best else None
    else:
        reference = row.get(target.against)
        reference = float(reference) if is_figure(reference) else None  # type: ignore[arg-type]
    value = ratio(row.get(column), reference)
    if value is None:
        return "n/a"
    met = value >= target.factor if target.higher_is_better else value <= target.factor
    return f"{'met' if met else 'missed'} ({value:.2f}x)"


def format_targets(
    title: str,
    rows_by_label: dict[str, dict[str, Cell]],
    targets: tuple[Target, ...],
    samsa_columns: tuple[str, ...] = SAMSA_COLUMNS,
) -> str:
    """The targets, one line each, a verdict per Samsa column."""
    width = max([TARGET_WIDTH, *(len(target.label) + 2 for target in targets)])
    lines = [
        title,
        f"{'':<{width}}" + "".join(f"{c:>{COLUMN_WIDTH}}" for c in samsa_columns),
    ]
    for target in targets:
        row = rows_by_label.get(target.row_label, {})
        verdicts = "".join(f"{verdict(target, row, c):>{COLUMN_WIDTH}}" for c in samsa_columns)
        lines.append(f"{target.label:<{width}}{verdicts}")
    return "\n".join(lines)


def cell_of(result: dict | str, key: str) -> Cell:
    """A measurement's figure under `key`, or the reason carried instead of a result."""
    if isinstance(result, str):
        return result
    value = result.get(key)
    return value if is_figure(value) else f"n/a (no {key})"


def rows_of(
    measured: Iterable[tuple[Metric, dict[str, dict | str]]], columns: tuple[str, ...] = COLUMNS
) -> Rows:
    """A table's rows from (metric, results by column): each column's figure under the metric's
    key, or the reason its result carries instead."""
    return [
        (metric, {column: cell_of(results[column], metric.key) for column in columns})
        for metric, results in measured
    ]

"""Goal: the README's worked pipeline (examples/spark_pipeline.py) does what it says: its stream
counts every page view of each closed 10-second window exactly once (read back at
read_committed), leaves open only the windows the 30-second watermark has not passed, and its
batch job writes every event to Parquet.

Method: the example's own cluster (its `example_cluster`: 1 controller, 1 broker, 1 coordinator,
stopped by PID also on failure) and its `run_pipeline` and `report`, on the Spark tests' shared
session; `main()` adds only starting a session of its own, which a second session in this
process cannot do. The expected counts are computed here from the events' timestamps.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"


def load_example():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected_closed_windows(example) -> Counter:  # type: ignore[no-untyped-def]
    """(window start, page) -> views, for the windows that end at or before the watermark."""
    timestamps = [example.START_MS + i * 500 for i in range(example.EVENTS)]
    watermark = max(timestamps) - 30_000
    counts: Counter = Counter()
    for i, timestamp in enumerate(timestamps):
        start = timestamp - timestamp % 10_000
        if start + 10_000 <= watermark:
            window = datetime.fromtimestamp(start / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
            counts[(window, example.PAGES[i % len(example.PAGES)])] += 1
    return counts


def test_the_worked_pipeline_counts_each_closed_window_once(spark, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    example = load_example()
    with example.example_cluster(tmp_path) as bootstrap:
        result = example.run_pipeline(spark, bootstrap, tmp_path)

    written = Counter((c["window"], c["page"]) for c in result.counts)
    twice = [key for key, times in written.items() if times > 1]
    assert not twice, f"counts written more than once: {twice[:5]}"
    expected = expected_closed_windows(example)
    assert len(expected) == 384  # 96 closed windows x 4 pages, 5 views each
    assert {(c["window"], c["page"]): c["count"] for c in result.counts} == dict(expected)
    assert result.parquet_rows == example.EVENTS

    example.report(result)
    printed = capsys.readouterr().out
    assert "384 closed windows counted exactly once" in printed
    assert "1920 page views in closed windows (of 2000;" in printed
    assert "batch job: 2000 page views written to Parquet" in printed

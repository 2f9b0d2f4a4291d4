"""Goal: the sync-latency table beside the bare ping-pong keeps, per column, the run with the
lowest p99 of its alternating runs, so that one slow tail on either side cannot decide the ratio;
a column with no figure at all keeps its first reason.

Method: `_lowest_p99` on hand-made runs (figures and reasons mixed)."""

from __future__ import annotations

from bench.idempotence_bench import _lowest_p99


def test_the_run_with_the_lowest_p99_is_kept_whatever_its_p50():
    runs = [
        {"p50_us": 400.0, "p99_us": 1567.0},
        {"p50_us": 450.0, "p99_us": 640.0},
        {"p50_us": 380.0, "p99_us": 900.0},
    ]
    assert _lowest_p99(runs) == {"p50_us": 450.0, "p99_us": 640.0}


def test_reasons_are_passed_over_while_a_run_has_figures():
    runs = ["n/a (timeout)", {"p50_us": 500.0, "p99_us": 800.0}]
    assert _lowest_p99(runs) == {"p50_us": 500.0, "p99_us": 800.0}


def test_without_any_figure_the_first_reason_stands():
    assert _lowest_p99(["n/a (server)", "n/a (other)"]) == "n/a (server)"

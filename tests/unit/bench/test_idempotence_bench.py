"""Goal: the sync-latency table beside the bare ping-pong keeps, per column, the run with the
lowest p99 of its alternating runs, so that one slow tail on either side cannot decide the ratio;
a column with no figure at all keeps its first reason; and JetStream, which a target is read
against, is measured and chosen the same way (two systems measured alike read alike).

Method: `_lowest_p99` on hand-made runs (figures and reasons mixed); the table over fake
measurement functions and a fake ping-pong (no server)."""

from __future__ import annotations

import contextlib

import pytest

from bench import cluster_bench as cb
from bench import idempotence_bench as ib
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


def test_jetstream_is_chosen_as_samsa_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """JetStream's figure was its one run from the latency table, against Samsa's lowest p99 of
    three: identical systems read "met (0.67x)"."""
    rounds_p99 = [600.0, 400.0, 500.0]  # every system, round by round
    calls = {"samsa": 0, "jetstream": 0}

    def samsa_sync(bootstrap, topic, n, size, acks=1, idempotence=None):  # type: ignore[no-untyped-def]
        p99 = rounds_p99[calls["samsa"] // 2]  # two Samsa columns a round
        calls["samsa"] += 1
        return {"p50_us": p99 / 2, "p99_us": p99}

    def nats_sync(url, count, size):  # type: ignore[no-untyped-def]
        p99 = rounds_p99[calls["jetstream"]]
        calls["jetstream"] += 1
        return {"p50_us": p99 / 2, "p99_us": p99}

    def pong(target: str, count: int, size: int) -> dict:
        return {"p50_us": 100.0, "p99_us": 200.0}

    systems = cb.Systems({"nats": "nats://x"}, {"sync_latency": samsa_sync}, "", "boot")
    systems.peer_functions["jetstream"]["sync_latency"] = nats_sync
    monkeypatch.setattr(ib, "create_topic", lambda *args: None)
    monkeypatch.setattr(ib, "ping_pong_server", lambda: contextlib.nullcontext("target"))
    monkeypatch.setattr(ib, "ping_pong_sync_latency", pong)
    monkeypatch.setattr(ib, "ping_pong_async_latency", pong)
    plan = cb.Plan(records={100: 10}, sync_calls=10, end_to_end_records=10, idempotence_rounds=3)
    text = ib.sync_latency_table(systems, plan)
    assert calls == {"samsa": 6, "jetstream": 3}
    line = next(line for line in text.splitlines() if line.startswith("sync p99 <= JetStream"))
    assert line.split()[-4:] == ["met", "(1.00x)", "met", "(1.00x)"]

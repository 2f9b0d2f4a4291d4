"""Goal: the compose benchmark's tables say what was measured — the start figures per cold run
and loopback (loopback has no `up -d` and no container health checks, so those cells say n/a,
not a made-up figure), throughput with a column per place the client ran and ratios over
loopback — and a compose side that could not run fills its cells with the reason.

Method: the table builders run on hand-made figures; the reason path runs with the Docker check
replaced (no engine, no cluster: the loopback side is replaced too).
"""

from __future__ import annotations

import pytest

from bench import compose_bench as cb

PLAN = cb.Plan.for_run(quick=True)


def _line(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(label))


def test_the_start_table_shows_each_cold_run_and_loopback() -> None:
    figures = cb.Figures(
        start={
            "compose run 1": {
                "up_s": 11.0,
                "containers_s": 21.0,
                "cluster_s": 23.0,
                "idle_cores": 0.5,
            },
            "compose run 2": "failed: AssertionError: not healthy in 120.0 s",
            cb.LOOPBACK: {"cluster_s": 7.4, "idle_cores": 0.05},
        }
    )
    text = cb.start_table(figures).text
    assert text.splitlines()[1].split() == [
        "compose",
        "run",
        "1",
        "compose",
        "run",
        "2",
        "loopback",
    ]
    assert _line(text, "`up -d` returned s").split()[-5:] == ["11.0", "see", "note", "1", "n/a"]
    assert _line(text, "every health check passed s").split()[-5:] == [
        "21.0", "see", "note", "1", "n/a",
    ]  # fmt: skip
    assert _line(text, "cluster healthy s").split()[-5:] == ["23.0", "see", "note", "1", "7.4"]
    assert _line(text, "then idle, CPU cores").split()[-5:] == ["0.50", "see", "note", "1", "0.05"]
    assert "note 1: failed: AssertionError: not healthy" in text


def test_the_throughput_table_puts_ratios_over_loopback() -> None:
    def result(records_per_s: float) -> dict:
        return {"records_per_s": records_per_s, "mb_per_s": records_per_s * 100 / 1e6}

    produced = {cb.NETWORK: result(50_000), cb.HOST: result(25_000), cb.LOOPBACK: result(1e5)}
    consumed = {cb.NETWORK: result(80_000), cb.HOST: "n/a (no produce)", cb.LOOPBACK: result(8e4)}
    figures = cb.Figures(produced=produced, consumed=consumed)
    text = cb.throughput_table(figures, PLAN).text
    header = text.splitlines()[1]
    assert "compose network/loopback" in header and "host via ports/loopback" in header
    produce = _line(text, "produce records/s").split()
    assert produce[-5:] == ["50,000", "25,000", "100,000", "0.50x", "0.25x"]
    consume = _line(text, "consume records/s").split()
    assert consume[-7:] == ["80,000", "n/a", "(no", "produce)", "80,000", "1.00x", "n/a"]
    assert f"{PLAN.records:,} records of 100 bytes, acks=all" in text.splitlines()[0]


def test_without_docker_the_compose_cells_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cb, "docker_missing", lambda: "n/a (needs root)")

    def loopback(figures: cb.Figures, plan: cb.Plan) -> None:
        figures.start[cb.LOOPBACK] = {"cluster_s": 5.0}
        figures.produced[cb.LOOPBACK] = {"records_per_s": 1.0, "mb_per_s": 1.0}
        figures.consumed[cb.LOOPBACK] = {"records_per_s": 1.0, "mb_per_s": 1.0}

    monkeypatch.setattr(cb, "loopback_side", loopback)
    notes, start, throughput = cb.run_compose_bench(quick=True)
    assert "compose side not run" in notes
    assert _line(start, "cluster healthy s").endswith("5.0")
    assert _line(start, "cluster healthy s").count("n/a (needs root)") == 2
    assert _line(throughput, "produce records/s").count("n/a (needs root)") == 2

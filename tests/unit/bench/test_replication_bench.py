"""Goal: the replication benchmark's tables say what was measured — a column per system, Samsa
over JetStream R3 in the ratio columns, issue 5's verdicts read off the acks=all column only, and
a rolling-restart table that states "lost: 0" only when the records were read back — and each
system is driven with the settings the comparison promises (acks per column, R3 streams).

Method: the table builders run on hand-made results with known ratios; the harness's dispatch
runs against fake measurement functions (no server, no network, no timing asserted).
"""

from __future__ import annotations

import types

import pytest

from bench import client_bench, nats_clients
from bench import replication_bench as rb
from bench.rolling_restart import ReadBack, RollingRestartResult
from bench.tables import Table

PLAN = rb.Plan.for_run(quick=True)


def _results(acks_1: float, acks_all: float, jetstream: float, key: str) -> dict:
    return {
        "samsa acks=1": {key: acks_1},
        "samsa acks=all": {key: acks_all},
        rb.JETSTREAM: {key: jetstream},
    }


def _size_table(jetstream_p99_us: float = 1000.0) -> Table:
    produced = _results(300_000.0, 100_000.0, 40_000.0, "records_per_s")
    for result in produced.values():
        result["mb_per_s"] = result["records_per_s"] * 100 / 1e6
    synced = {
        "samsa acks=1": {"p50_us": 600.0, "p99_us": 900.0},
        "samsa acks=all": {"p50_us": 1500.0, "p99_us": 2000.0},
        rb.JETSTREAM: {"p50_us": 300.0, "p99_us": jetstream_p99_us},
    }
    return rb.size_table(100, PLAN, produced, synced)


def _line(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(label))


def test_the_size_table_has_a_column_per_system_and_ratios_against_jetstream_r3() -> None:
    text = _size_table().text
    header = text.splitlines()[1]
    for name in ("samsa acks=1", "samsa acks=all", "jetstream R3"):
        assert name in header
    assert "samsa acks=1/jetstream R3" in header and "samsa acks=all/jetstream R3" in header
    produce = _line(text, "produce records/s")
    assert "300,000" in produce and "100,000" in produce and "40,000" in produce
    assert produce.endswith("7.50x                        2.50x")  # no "(peer)" with one peer
    p99 = _line(text, "sync produce p99 µs")
    assert "0.90x" in p99 and "2.00x" in p99  # latency: below 1 is Samsa faster
    assert "100-byte records" in text.splitlines()[0] and "R3" in text.splitlines()[0]


def test_the_targets_read_the_acks_all_column_against_jetstream_r3() -> None:
    lines = rb.targets_text(100, _size_table()).splitlines()
    assert lines[0].startswith("targets (issues 5 and 11), 100-byte records")
    assert lines[1].split() == ["samsa", "acks=all"]
    assert lines[2].startswith("acks=all produce >= 2x JetStream R3")
    assert lines[2].endswith("met (2.50x)")
    assert lines[3].startswith("acks=all sync p99 <= JetStream R3's")
    assert lines[3].endswith("missed (2.00x)")
    assert lines[4].startswith("acks=all sync p99 <= 2x JetStream R3's")  # issue 11's
    assert lines[4].endswith("met (2.00x)")
    met = rb.targets_text(100, _size_table(jetstream_p99_us=2500.0)).splitlines()
    assert met[3].endswith("met (0.80x)")
    missed = rb.targets_text(100, _size_table(jetstream_p99_us=999.0)).splitlines()
    assert missed[4].endswith("missed (2.00x)")  # 2,000 / 999 is above 2


def test_a_missing_jetstream_figure_gives_no_verdict() -> None:
    produced = _results(1.0, 1.0, 1.0, "records_per_s")
    produced[rb.JETSTREAM] = "n/a (cluster: failed)"
    table = rb.size_table(1024, PLAN, produced, produced)
    assert table.text.splitlines()[0].startswith("1 KiB records")
    assert all(line.endswith("n/a") for line in rb.targets_text(1024, table).splitlines()[2:])


def _stall_result(read_back: ReadBack | None, error: str = "") -> RollingRestartResult:
    acks = [0.001 * i for i in range(1000)] + [3.0 + 0.001 * i for i in range(1000)]
    return RollingRestartResult(
        ack_times_s=acks,
        restarts=[("broker-1 (leader)", 0.5), ("broker-2", 2.5)],
        back_in_sync_s={"broker-1 (leader)": 3.2, "broker-2": 2.9},
        end_s=4.0,
        sent=2000,
        acked=2000,
        failed=0,
        read_back=read_back,
        read_back_error=error,
    )


def test_the_stall_table_shows_each_window_and_says_lost_0_only_when_it_checked() -> None:
    text = rb.stall_table(_stall_result(ReadBack(2000, 0, 3)), PLAN).text
    lines = text.splitlines()
    assert "Samsa only" in lines[0]
    assert lines[1].split() == ["samsa", "acks=all"]  # no JetStream column, no ratio
    assert _line(text, "max ack gap, broker-1 (leader) ms").endswith("2,001.0")
    assert _line(text, "max ack gap, broker-2 ms").endswith("2,001.0")
    assert _line(text, "max ack gap, steady ms").endswith("1.0")
    assert _line(text, "max ack gap ms").endswith("2,001.0")
    assert _line(text, "broker-1 (leader) SIGTERM to full ISR s").endswith("3.2")
    assert _line(text, "acked records lost").endswith(" 0")
    assert _line(text, "records stored twice").endswith(" 3")
    edges = {line.rstrip()[-1] != " " for line in lines[2:]}
    assert edges == {True}


def test_unchecked_records_are_never_reported_as_not_lost() -> None:
    result = _stall_result(None, "not checked: TimeoutError: read 5 of 10 records, then nothing")
    text = rb.stall_table(result, PLAN).text
    assert _line(text, "acked records lost").endswith("see note 1")
    assert "note 1: not checked: TimeoutError" in text


def test_a_failed_rolling_restart_fills_its_rows_with_the_reason() -> None:
    text = rb.stall_table("failed: TimeoutError: no full ISR", PLAN).text
    assert _line(text, "acked records lost").endswith("see note 1")
    assert text.splitlines()[-1] == "  note 1: failed: TimeoutError: no full ISR"


def test_quick_plan_is_smaller_than_the_full_one() -> None:
    full = rb.Plan.for_run(False)
    assert set(full.load.records) == set(rb.SIZES)
    for size in rb.SIZES:
        assert 0 < PLAN.load.records[size] < full.load.records[size]
    assert 0 < PLAN.load.sync_calls < full.load.sync_calls
    assert 0 < PLAN.settle_s <= full.settle_s


def test_each_system_is_driven_with_its_acks_and_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple] = []

    def samsa_produce(bootstrap, topic, n, size, compression, acks):
        calls.append(("samsa", topic, n, size, compression, acks))
        return {"records_per_s": 1.0}

    def nats_produce(url, n, size, replicas):
        calls.append(("nats", url, n, size, replicas))
        return {"records_per_s": 1.0}

    monkeypatch.setattr(client_bench, "samsa_produce", samsa_produce)
    monkeypatch.setattr(nats_clients, "nats_produce", nats_produce)
    systems = rb.Systems()
    assert systems.measure(rb.JETSTREAM, "produce", 100, 10) == "n/a (not started)"
    assert systems.measure("samsa acks=all", "produce", 100, 10) == "n/a (not started)"
    systems.nats_url = "nats://127.0.0.1:4222"

    cluster = types.SimpleNamespace(spec=types.SimpleNamespace(bootstrap_servers="127.0.0.1:9092"))
    systems.cluster = cluster  # type: ignore[assignment]
    for column in rb.COLUMNS:
        assert systems.measure(column, "produce", 1024, 10) == {"records_per_s": 1.0}
    assert calls == [
        ("samsa", "replication-1024b-acks-1", 10, 1024, "none", 1),
        ("samsa", "replication-1024b-acks-all", 10, 1024, "none", "all"),
        ("nats", "nats://127.0.0.1:4222", 10, 1024, 3),
    ]

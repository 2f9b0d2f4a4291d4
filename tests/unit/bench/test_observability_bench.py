"""Goal: the observability benchmark's table says what was measured — each configuration's
better run per row over off's, a failed run that does not hide its twin, every run and every
span count in the notes, the targets judged on records/s, the span-per-send column shown but
not judged — and each service is started with exactly the variables its configuration asks for
(none left over from the shell in "off").

Method: the table builder runs on hand-made results with known ratios; the environments are
built for hand-made ports and a span file path (no process, no network, no timing asserted).
"""

from __future__ import annotations

from bench import observability_bench as ob

PLAN = ob.Plan(records=1_000, rounds=2)


def _run(produce: float, consume: float, spans: dict[str, int] | None = None) -> dict:
    run: dict = {
        "produce": {"records_per_s": produce, "mb_per_s": produce * ob.SIZE / 1e6},
        "consume": {"records_per_s": consume, "mb_per_s": consume * ob.SIZE / 1e6},
    }
    if spans is not None:
        run["spans"] = spans
    return run


def _runs() -> dict[str, list[ob.Run]]:
    return {
        ob.OFF: [_run(100_000.0, 200_000.0), _run(90_000.0, 210_000.0)],
        ob.METRICS: [_run(97_000.0, 180_000.0), "failed: RuntimeError: boom"],
        ob.TRACING_1: [_run(50_000.0, 100_000.0, {"bench-client": 20, "samsa-broker-1": 3})] * 2,
        ob.TRACING_100: ["failed: RuntimeError: boom", _run(10_000.0, 20_000.0, {})],
        ob.TRACING_1_PER_SEND: [_run(30_000.0, 60_000.0, {"bench-client": 19})] * 2,
    }


def _line(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(label))


def test_each_row_keeps_the_better_run_and_divides_by_off() -> None:
    text = ob.observability_table(_runs(), PLAN)
    produce = _line(text, "produce records/s").split()
    # metrics, tracing 1%, tracing 100%, 1% span per send, off, then the four ratios over off
    assert produce[2:] == [
        *("97,000", "50,000", "10,000", "30,000", "100,000"),
        *("0.97x", "0.50x", "0.10x", "0.30x"),
    ]
    consume = _line(text, "consume records/s").split()
    assert consume[2:] == [
        *("180,000", "100,000", "20,000", "60,000", "210,000"),
        *("0.86x", "0.48x", "0.10x", "0.29x"),
    ]


def test_every_column_header_fits_its_column() -> None:
    header = ob.observability_table(_runs(), PLAN).splitlines()[2]
    for name in (*ob.MEASURED, ob.OFF):
        assert f" {name} " in f"{header} ", name


def test_notes_list_every_run_and_the_spans_per_service() -> None:
    text = ob.observability_table(_runs(), PLAN)
    assert "off 100,000 / 90,000; metrics 97,000 / failed: RuntimeError: boom" in text
    assert (
        "spans written, tracing 1%, per run: 23 (bench-client 20, samsa-broker-1 3) / 23 (" in text
    )
    assert "spans written, tracing 100%, per run: n/a / 0" in text
    assert "spans written, 1% span per send, per run: 19 (bench-client 19) / 19 (" in text
    # 1,000 records: one chunk (its span and 1,000 polls) or a send and a poll per record
    assert "~10 at tracing 1%, ~1,001 at tracing 100%, ~20 at 1% span per send" in text


def test_the_chunked_columns_and_the_span_per_send_one_are_told_apart() -> None:
    by_name = {c.name: c for c in ob.CONFIGURATIONS}
    assert not by_name[ob.TRACING_1].span_per_send and not by_name[ob.TRACING_100].span_per_send
    assert by_name[ob.TRACING_1_PER_SEND].span_per_send
    assert by_name[ob.TRACING_1_PER_SEND].sampling_ratio == by_name[ob.TRACING_1].sampling_ratio
    assert ob.client_spans_expected(by_name[ob.TRACING_1], 200_000) == 2_002
    assert ob.client_spans_expected(by_name[ob.TRACING_1_PER_SEND], 200_000) == 4_000
    text = ob.observability_table(_runs(), PLAN)
    assert "1% span per send is tracing 1% with an application span around every send()" in text


def test_targets_are_judged_on_records_per_second_over_off() -> None:
    text = ob.observability_table(_runs(), PLAN)
    assert _line(text, "metrics: produce").split()[-2:] == ["met", "(0.97x)"]
    assert _line(text, "metrics: consume").split()[-2:] == ["missed", "(0.86x)"]
    assert _line(text, "tracing 1%: produce").split()[-2:] == ["missed", "(0.50x)"]
    assert "0.30x" not in text.split("\n\n")[-1]  # span per send: shown, not judged


def test_services_get_only_what_their_configuration_turns_on() -> None:
    names = ["controller-1", "broker-1"]
    by_name = {c.name: c for c in ob.CONFIGURATIONS}
    off = ob.service_environments(names, by_name[ob.OFF], [], "/t/spans")
    assert off["broker-1"] == dict.fromkeys((ob.METRICS_VARIABLE, *ob.TRACING_VARIABLES))
    metrics = ob.service_environments(names, by_name[ob.METRICS], [9001, 9002], "/t/spans")
    assert metrics["controller-1"][ob.METRICS_VARIABLE] == "127.0.0.1:9001"
    assert metrics["broker-1"][ob.METRICS_VARIABLE] == "127.0.0.1:9002"
    assert metrics["broker-1"]["OTEL_TRACES_EXPORTER"] is None
    traced = ob.service_environments(names, by_name[ob.TRACING_1], [], "/t/spans")
    assert traced["broker-1"] == {
        ob.METRICS_VARIABLE: None,
        "OTEL_TRACES_EXPORTER": "file",
        "SAMSA_TRACES_FILE": "/t/spans",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.01",
        "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
    }
    per_send = ob.service_environments(names, by_name[ob.TRACING_1_PER_SEND], [], "/t/spans")
    assert per_send == traced


def test_the_second_round_runs_the_configurations_in_reverse() -> None:
    names = [ob.OFF, ob.METRICS, ob.TRACING_1, ob.TRACING_100, ob.TRACING_1_PER_SEND]
    assert [c.name for c in PLAN.order(0)] == names
    assert [c.name for c in PLAN.order(1)] == names[::-1]

"""Goal: the harness around the measurements keeps a run going and finds Samsa's side — a
failure becomes a bounded reason for its cell, the Samsa columns read "n/a (not built)" until
bench/client_bench.py has every measurement function and light up when it does, and each function
is called with just the arguments it names.

Method: fake client_bench modules are put in sys.modules, and the argument matching runs against
hand-written functions (no server, no network).
"""

from __future__ import annotations

import sys
import types

import pytest

from bench import harness
from bench.tables import NOT_BUILT


def test_a_failure_reason_names_the_error_and_stays_bounded() -> None:
    assert harness.failure_reason(TimeoutError("no ack")) == "failed: TimeoutError: no ack"
    assert harness.failure_reason(KeyError()) == "failed: KeyError"
    long = harness.failure_reason(RuntimeError("x" * 1000), limit=50)
    assert len(long) == 50 and long.endswith("...")


def test_samsa_is_not_built_while_client_bench_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bench.client_bench", None)  # import raises ModuleNotFound
    functions, reason = harness.load_samsa_functions()
    assert functions == {}
    assert reason == "n/a (not built)"


def test_samsa_lights_up_when_client_bench_has_its_functions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("bench.client_bench")
    for kind in harness.MEASUREMENT_KINDS:
        setattr(module, f"samsa_{kind}", lambda **kwargs: kwargs)
    monkeypatch.setitem(sys.modules, "bench.client_bench", module)
    functions, reason = harness.load_samsa_functions()
    assert reason == ""
    assert set(functions) == set(harness.MEASUREMENT_KINDS)


def test_the_real_client_bench_has_every_kind_and_the_samsa_only_ones() -> None:
    functions, reason = harness.load_samsa_functions()
    assert reason == ""
    assert set(functions) == {*harness.MEASUREMENT_KINDS, *harness.KINDS_FOR_SAMSA_ONLY}


def test_a_partial_client_bench_reports_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("bench.client_bench")
    module.samsa_produce = lambda **kwargs: kwargs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench.client_bench", module)
    functions, reason = harness.load_samsa_functions()
    assert set(functions) == {"produce"}
    assert reason == NOT_BUILT


def test_call_with_available_passes_only_what_the_function_names() -> None:
    def samsa_produce(bootstrap, topic, n, size, compression="none", acks=-1):
        return {"got": (bootstrap, topic, n, size, compression, acks)}

    available = {"bootstrap": "b", "topic": "t", "n": 5, "size": 100, "compression": "zstd",
                 "acks": 1, "partitions": 6}  # fmt: skip
    assert harness.call_with_available(samsa_produce, available) == {
        "got": ("b", "t", 5, 100, "zstd", 1)
    }


def test_call_with_available_names_a_required_parameter_it_cannot_supply() -> None:
    def samsa_consume(bootstrap, topic, group_id):
        return {}

    with pytest.raises(TypeError, match="group_id"):
        harness.call_with_available(samsa_consume, {"bootstrap": "b", "topic": "t"})


def test_call_with_available_gives_everything_to_kwargs() -> None:
    def measure(**kwargs):
        return kwargs

    assert harness.call_with_available(measure, {"a": 1, "b": 2}) == {"a": 1, "b": 2}

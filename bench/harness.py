"""The benchmarks' harness: what every cluster bench does around its measurements — run one
and turn a failure into its cell's text, find Samsa's measurement functions, start a local Samsa
cluster for the run and create its topics, and print the tables as they come.

A failed measurement never ends a run: its cell reads "failed: <error>" (the table moves it to a
note) and the traceback goes to stderr, so that the other figures of the same run still count.
Every process the harness starts is stopped by PID on the way out, whatever happens in between.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import platform
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from bench.tables import NOT_BUILT
from samsa.common import event_loops

if TYPE_CHECKING:
    from samsa.cli.launcher import LocalCluster

# --- one measurement -----------------------------------------------------------------------


def failure_reason(error: BaseException, limit: int = 200) -> str:
    """What goes in a cell when a measurement failed (the table moves it to a note)."""
    text = f"failed: {type(error).__name__}: {error}".strip().rstrip(":")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def measure_or_reason(function: Callable[[], dict]) -> dict | str:
    """Run one measurement; a failure becomes the cell's text, with the traceback on stderr."""
    try:
        return function()
    except Exception as error:  # one failed cell must not lose the others
        traceback.print_exc()
        return failure_reason(error)


# --- the measurement functions: the peers', and Samsa's once bench/client_bench.py exists ----

# What every system is measured on. A system's module names its function for each kind
# `<system>_<kind>`: samsa_produce (bench/client_bench.py), nats_produce, redis_produce, ….
MEASUREMENT_KINDS = ("produce", "consume", "sync_latency", "end_to_end_latency")
# Measured for Samsa only: produce->consume from asyncio code (the peers' clients are asyncio
# already, so their end_to_end_latency is that measurement).
KINDS_FOR_SAMSA_ONLY = ("end_to_end_latency_asyncio",)


def measurement_functions(
    module: ModuleType, system: str, kinds: tuple[str, ...] = MEASUREMENT_KINDS
) -> dict[str, Callable[..., dict]]:
    """The module's measurement functions by kind, those it has (`<system>_<kind>`)."""
    named = {kind: getattr(module, f"{system}_{kind}", None) for kind in kinds}
    return {kind: function for kind, function in named.items() if callable(function)}


def load_samsa_functions() -> tuple[dict[str, Callable[..., dict]], str]:
    """Samsa's measurement functions by kind, and why any are missing ("" when none are)."""
    try:
        module = importlib.import_module("bench.client_bench")
    except ModuleNotFoundError as error:
        if error.name == "bench.client_bench":
            return {}, NOT_BUILT
        raise
    functions = measurement_functions(module, "samsa")
    complete = len(functions) == len(MEASUREMENT_KINDS)
    functions.update(measurement_functions(module, "samsa", KINDS_FOR_SAMSA_ONLY))
    return functions, "" if complete else NOT_BUILT


def call_with_available(function: Callable[..., dict], available: dict[str, object]) -> dict:
    """Call `function` with those of `available` that it names, so that the harness does not
    break when client_bench's signatures gain or lose an optional parameter; a required
    parameter the harness cannot supply is an error that names it."""
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    arguments = {
        name: value for name, value in available.items() if takes_any or name in parameters
    }
    missing = [
        name
        for name, parameter in parameters.items()
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and name not in arguments
    ]
    if missing:
        raise TypeError(f"{function.__name__} needs {missing}, which the harness does not supply")
    return function(**arguments)


@contextlib.contextmanager
def running_samsa(
    controllers: int = 1,
    brokers: int = 1,
    settings: dict[str, str] | None = None,
    *,
    coordinators: int = 0,
    name: str = "cluster",
) -> Iterator[LocalCluster]:
    """A healthy local Samsa cluster in a temporary directory (samsa-bench-`name`-…) for the
    run; every process is stopped by PID on the way out (the launcher's `running`), whatever
    happens in between."""
    from samsa.cli.launcher import LocalCluster, load_or_create, running, wait_healthy

    with tempfile.TemporaryDirectory(prefix=f"samsa-bench-{name}-") as root:
        spec = load_or_create(Path(root), controllers, brokers, settings, coordinators=coordinators)
        with running(LocalCluster(spec, Path(root))) as cluster:
            wait_healthy(cluster)
            yield cluster


@contextlib.contextmanager
def samsa_cluster(brokers: int = 1) -> Iterator[str]:
    """A local Samsa cluster (1 controller, `brokers` brokers); yields its bootstrap servers."""
    with running_samsa(1, brokers) as cluster:
        yield cluster.spec.bootstrap_servers


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Create `topic` (replication factor 1) through whichever controller is active."""
    import grpc

    from samsa.v1 import controller_pb2, controller_pb2_grpc, errors_pb2

    request = controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreateTopicsRequest.Topic(
                name=topic, num_partitions=partitions, replication_factor=1
            )
        ]
    )
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        for endpoint in bootstrap.split(","):
            with grpc.insecure_channel(endpoint) as channel:
                stub = controller_pb2_grpc.ControllerServiceStub(channel)
                try:
                    answer = stub.CreateTopics(request, timeout=5)
                except grpc.RpcError as error:
                    last = f"{endpoint}: {error.code().name}"
                    continue
            if answer.status.error_code != errors_pb2.ERROR_CODE_UNSPECIFIED:  # e.g. NOT_CONTROLLER
                last = f"{endpoint}: {answer.status.error_message}"
                continue
            (result,) = answer.topics
            if result.error_code in (
                errors_pb2.ERROR_CODE_UNSPECIFIED,
                errors_pb2.ERROR_CODE_TOPIC_ALREADY_EXISTS,
            ):
                return
            last = f"{errors_pb2.ErrorCode.Name(result.error_code)}: {result.error_message}"
        time.sleep(0.2)
    raise RuntimeError(f"could not create {topic}: {last}")


# --- the output --------------------------------------------------------------------------


def print_tables(heading: str, tables: Iterable[str], name: str) -> None:
    """The heading, each table as soon as it is measured (a run takes minutes), then how long
    the whole took."""
    started = time.monotonic()
    print(
        f"{heading} on {platform.python_implementation()} {platform.python_version()}, "
        f"one Python process per client, event loop {event_loops.chosen()} (Samsa's services, "
        "its clients, the ping-pong and the peers' clients alike)",
        flush=True,
    )
    for table in tables:
        print()
        print(table, flush=True)
    print(f"\n({name} took {time.monotonic() - started:.0f} s)")

"""What every service's `main` does before its own work: load the config (flags, SAMSA_*, a
--config file), configure the JSON logs, lock the data directory (one process per directory:
data_dir_lock.py), raise the open-files limit (open_files.py), load the cluster secret and the
TLS files (transport.py), set up tracing and metrics, keep large buffers in the heap
(common/allocator.py: record batches are allocated and freed once per request), then run the
service until SIGTERM. Any mistake found on the way stops the process with one line,
`samsa <kind>: <what is wrong>`, and exit code 2 — a listen address that cannot be bound
(found once the service starts its gRPC server, or before a controller starts its Raft port)
too.

A service refuses to run under `python -O` (or PYTHONOPTIMIZE): that drops every `assert`, and
the asserts are checks, not comments — the relations between the bounds in common/limits.py,
and the invariants the pure cores hold (a log's offsets only grow, one batch in flight per
writer, ...). Running without them would turn a broken invariant into silent corruption."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from samsa.common import allocator, event_loops, grpc_experiments, tls
from samsa.services.runtime import config_loading, faults, logs, metrics, telemetry, transport
from samsa.services.runtime.config import ConfigError
from samsa.services.runtime.data_dir_lock import DataDirError, DataDirLock, lock_data_dir
from samsa.services.runtime.open_files import raise_open_files_limit
from samsa.services.runtime.secret import ClusterSecretError, load_secret
from samsa.services.runtime.server import ServerStartError
from samsa.services.runtime.service_config import ServiceConfig

C = TypeVar("C", bound=ServiceConfig)
STARTUP_ERRORS = (
    ConfigError,
    ClusterSecretError,
    telemetry.TelemetryConfigError,
    metrics.MetricsConfigError,
    event_loops.EventLoopChoiceError,
    DataDirError,
    faults.FaultsConfigError,
    logs.LogConfigError,
    tls.TlsConfigError,
)


def run_service(
    kind: str,
    config_class: type[C],
    argv: Sequence[str] | None,
    number: Callable[[C], int],
    run: Callable[[C, str, bool], Coroutine[Any, Any, int]],
    data_dir: Callable[[C], str] | None = None,
) -> int:
    """`run(config, secret, tracing)` on a fresh event loop once everything is in place;
    `number` names this process among its kind (broker.id, node.id, coordinator.id), and
    `data_dir` the directory it keeps its files in, locked for it alone (data_dir_lock.py)."""
    served = None
    locked: DataDirLock | None = None
    if not __debug__:
        print(
            f"samsa {kind}: refusing to run under python -O (PYTHONOPTIMIZE): it drops the "
            "assertions that check Samsa's invariants; run python without -O",
            file=sys.stderr,
        )
        return 2
    try:
        event_loop = event_loops.chosen()  # first: a bad SAMSA_EVENT_LOOP says so at once
        faults.check()  # and a bad SAMSA_FAULTS
        heap = allocator.tune_for_large_buffers()  # record batches stay in the heap
        open_files = raise_open_files_limit()  # files and connections (open_files.py)
        config = config_loading.load(config_class, kind, argv, os.environ)
        logs.configure(f"{kind}-{number(config)}")
        if data_dir is not None:
            locked = lock_data_dir(Path(data_dir(config)), f"{kind} {number(config)}")
        secret = load_secret(Path(config.secret_file))
        secured = transport.configure(config)  # before any listener or channel exists
        name = f"samsa-{kind}-{number(config)}"
        tracing = telemetry.configure(name)
        served = metrics.serve(config.metrics_listen, name)
        logging.getLogger(__name__).info(
            "starting",
            extra={
                "event_loop": event_loop,
                "allocator": heap,
                "open_files_limit": open_files,
                "grpc_experiments": os.environ.get(grpc_experiments.VARIABLE, ""),
                "security_protocol": config.security_protocol,
                "ssl_client_auth": config.ssl_client_auth if secured else None,
            },
        )
    except STARTUP_ERRORS as error:
        print(f"samsa {kind}: {error}", file=sys.stderr)
        if locked is not None:
            locked.release()
        return 2
    try:
        return event_loops.run(run(config, secret, tracing))
    except ServerStartError as error:  # the listen address is taken: as a bad setting
        print(f"samsa {kind}: {error}", file=sys.stderr)
        return 2
    finally:
        if served is not None:
            served.shutdown()
        if locked is not None:
            locked.release()

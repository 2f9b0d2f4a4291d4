"""The gRPC core experiments Samsa's processes run with: gRPC's EventEngine client and listener off.

Why. grpcio 1.85 does its socket I/O on the EventEngine by default (the `event_engine_client`
and `event_engine_listener` experiments): every read and write hops through EventEngine's own
thread pool before it reaches the thread or event loop that waits for it. On two shared cores
those hops are most of a small message's latency. Turned off, gRPC uses its older poller, which
runs the I/O in the polling thread itself. Measured here (2026-11-27, alternating runs): the bare
grpc.aio stream ping-pong (bench/ping_pong.py) p50 193-315 -> 127-194 us with a sync caller;
a synchronous 100-byte produce to one broker p50 846-1,251 -> 549-1,000 us
(docs/benchmarks.md, "gRPC's poller").

How. gRPC reads GRPC_EXPERIMENTS once, as `grpc` is first imported, so `prefer_legacy_poller`
must run before that: the services' `__main__` modules, the SDK's and the CLI's package
`__init__`, and the benchmark's bare ping-pong call it first. It changes nothing when the
environment already sets GRPC_EXPERIMENTS (the operator's or the application's choice wins;
`GRPC_EXPERIMENTS=` keeps gRPC's defaults), or when `grpc` is already imported (the application
chose gRPC's setup before it imported Samsa). The variable stays set, so processes started from
this one (the launcher's services, Spark's workers) inherit it. A grpcio release that drops these
experiments would log "Unknown experiment" at start: tests/unit/test_grpc_experiments.py fails
then, and this module should go.

Services also default GRPC_VERBOSITY to ERROR (`quiet_core_logs`): gRPC's core otherwise writes
an INFO line to stderr, outside the JSON logs, for every failed TLS handshake, so that any
stranger dialling a TLS listener in plaintext could fill a service's log. An operator who wants
those lines sets GRPC_VERBOSITY=INFO; clients see their own handshake failures in the error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

VARIABLE = "GRPC_EXPERIMENTS"
LEGACY_POLLER = "-event_engine_client,-event_engine_listener"


def experiments_to_set(environ: Mapping[str, str], grpc_imported: bool) -> str | None:
    """The GRPC_EXPERIMENTS value to set, or None to leave the environment alone."""
    if grpc_imported or VARIABLE in environ:
        return None
    return LEGACY_POLLER


def prefer_legacy_poller(environ: MutableMapping[str, str] = os.environ) -> str:
    """Set GRPC_EXPERIMENTS for this process if nothing chose yet; returns what it holds now
    ("" when unset), for the start-up log."""
    value = experiments_to_set(environ, "grpc" in sys.modules)
    if value is not None:
        environ[VARIABLE] = value
    return environ.get(VARIABLE, "")


VERBOSITY = "GRPC_VERBOSITY"


def quiet_core_logs(environ: MutableMapping[str, str] = os.environ) -> None:
    """GRPC_VERBOSITY=ERROR unless the environment chose (module docstring); call it first."""
    environ.setdefault(VERBOSITY, "ERROR")

"""`samsa up`: run a local cluster in the foreground until Ctrl-C.

Starts the controllers, brokers and coordinators of `--data-dir` as local processes (see
launcher.py), waits until a controller is active and every broker and coordinator is registered
and unfenced, prints the bootstrap
address, then watches: a process that dies is reported (its log tail shown) and the rest keep
running, as a real cluster would. Ctrl-C, SIGTERM or SIGHUP (the terminal closed) stops every
process cleanly. One `samsa up` per data directory: a second one on it is refused at once, naming
the first one's pid (and each broker and controller locks its own directory too:
runtime/data_dir_lock.py).

`--tls`: every process serves TLS and requires a client certificate signed by the cluster's own
CA, all made in `<data-dir>/tls/` at the first start (cluster_tls.py). `samsa up` prints the
client settings that connect (the `samsa` commands find them in cluster.json by themselves) and
writes them to `<data-dir>/tls/client.properties`, for `--command-config`. A directory keeps the
TLS it was made with: `samsa up` with the other choice is refused (launcher.load_or_create).

`--authorizer` (with `--tls` only): every process enforces ACLs, the client certificate's
principal (User:CN=client,O=samsa) being the one super user, so that the `samsa` commands keep
doing everything, `samsa acls` included; other principals need ACLs (README "Access control").

`--sasl` (implies `--tls`): every process requires a SASL/SCRAM login instead of a client
certificate; the first user, admin, gets a random password at the first start
(`<data-dir>/tls/admin.password`), which client.properties holds for the `samsa` commands and is
never printed. With `--authorizer`, admin (User:admin) is the super user.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from samsa.cli.cluster_spec import CLIENT_PRINCIPAL, SASL_PRINCIPAL, TLS_DIR
from samsa.cli.launcher import ClusterNotHealthyError, LocalCluster, load_or_create, wait_healthy
from samsa.common.tls import SASL_PASSWORD
from samsa.services.runtime.data_dir_lock import DataDirError, lock_data_dir

CLIENT_PROPERTIES = "client.properties"


def up(
    data_dir: Path,
    controllers: int,
    brokers: int,
    coordinators: int = 2,
    timeout_s: float = 90.0,
    *,
    tls: bool = False,
    authorizer: bool = False,
    sasl: bool = False,
) -> int:
    data_dir = data_dir.resolve()
    try:
        held = lock_data_dir(data_dir, "samsa up")  # a second `samsa up` here stops at once
    except DataDirError as error:  # in use, or not a directory this process may use
        print(f"samsa up: {error}", file=sys.stderr)
        return 2
    with held:
        return _up(data_dir, controllers, brokers, coordinators, timeout_s, tls, authorizer, sasl)


def _up(
    data_dir: Path,
    controllers: int,
    brokers: int,
    coordinators: int,
    timeout_s: float,
    tls: bool,
    authorizer: bool,
    sasl: bool,
) -> int:
    try:
        spec = load_or_create(
            data_dir,
            controllers,
            brokers,
            coordinators=coordinators,
            tls=tls,
            authorizer=authorizer,
            sasl=sasl,
        )
        security = spec.client_security(data_dir)
        if security:
            write_client_properties(data_dir / TLS_DIR / CLIENT_PROPERTIES, security)
    except (ValueError, OSError) as error:
        print(f"samsa up: {error}", file=sys.stderr)
        return 2
    cluster = LocalCluster(spec, data_dir)
    _stop_on_sigterm()
    print(f"data directory  {data_dir}")
    print(
        f"starting        {controllers} controllers, {brokers} brokers, {coordinators} "
        f"coordinators (logs in {data_dir}/logs)"
    )
    try:
        cluster.start_all()
        started = time.monotonic()
        wait_healthy(cluster, timeout_s)
        print(f"healthy         after {time.monotonic() - started:.1f} s")
        print(f"bootstrap       {spec.bootstrap_servers}")
        if security:
            print(
                f"tls             clients connect with ({data_dir / TLS_DIR / CLIENT_PROPERTIES}):"
            )
            for key, value in security.items():
                shown = "(in the file above)" if key == SASL_PASSWORD else value
                print(f"                  {key}={shown}")
        if spec.authorizer:
            super_user = SASL_PRINCIPAL if spec.sasl else CLIENT_PRINCIPAL
            print(f"authorizer      ACLs enforced; super user {super_user} (samsa acls)")
        print("                Ctrl-C stops it; `samsa up` on this directory restarts it")
        _watch(cluster)
    except ClusterNotHealthyError as error:
        print(f"samsa up: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping        …")
    finally:
        _stop(cluster)
    print("stopped")
    return 0


def client_properties(security: dict[str, str]) -> str:
    """A client's settings as a properties file (`--command-config`, Kafka's tools' format)."""
    lines = ["# samsa up: the settings a client of this cluster connects with"]
    return "\n".join([*lines, *(f"{key}={value}" for key, value in security.items())]) + "\n"


def write_client_properties(path: Path, security: dict[str, str]) -> None:
    """client.properties, readable by its owner only: with --sasl it holds admin's password."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(client_properties(security))
    path.chmod(0o600)  # a file an older `samsa up` made readable by others


def _stop(cluster: LocalCluster) -> None:
    """Stop every process gracefully; a second Ctrl-C (or SIGTERM) meanwhile kills what is still
    running instead of breaking off the stop, which left the rest running, orphaned."""
    try:
        cluster.stop_all()
    except KeyboardInterrupt:
        for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # nothing may interrupt it
            signal.signal(stop, signal.SIG_IGN)
        print("killing         the processes still running", flush=True)
        for name, process in cluster.processes.items():
            if process.poll() is None:
                cluster.kill(name)


def _watch(cluster: LocalCluster) -> None:
    reported: set[str] = set()
    while True:
        time.sleep(0.5)
        for name, code in cluster.exited().items():
            if name not in reported:
                reported.add(name)
                print(f"warning         {name} exited with code {code}:", file=sys.stderr)
                print(cluster.log_tail(name, 10), file=sys.stderr)


def _stop_on_sigterm() -> None:
    """SIGTERM and SIGHUP stop the cluster as Ctrl-C does. SIGHUP comes when the terminal
    closes: the services run in sessions of their own (so that Ctrl-C reaches `samsa up` only),
    so without this `samsa up` would die of it and leave them all running. A SIGHUP ignored
    already (`nohup samsa up`) stays ignored: the cluster outlives the terminal, as asked."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, handler)

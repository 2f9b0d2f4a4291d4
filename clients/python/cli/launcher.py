"""Start, watch and stop a local Samsa cluster as OS processes: what `samsa up` and the
integration tests run.

Theory of operation. A cluster lives in one data directory:

    <data-dir>/cluster.json        node ids and the loopback ports chosen at first start
                                   (cluster_spec.py; one it did not write is refused)
    <data-dir>/cluster.secret      the cluster secret (0600), given to every controller and broker:
                                   the Raft password, and the key of the proofs members' calls
                                   carry; neither starts without it
    <data-dir>/tls/                with --tls: the cluster's private CA, a certificate per process
                                   and one for clients (cluster_tls.py); with --sasl also admin's
                                   password and the controllers' bootstrap file (both 0600)
    <data-dir>/controller-<id>/    a controller's Raft journal and snapshots
    <data-dir>/broker-<id>/        a broker's partition logs
                                   (coordinators keep no local state: their groups live in
                                   the brokers' __consumer_offsets, their transactions in
                                   __transaction_state)
    <data-dir>/logs/<name>.log     each process's stderr: its log (JSON lines)
    <data-dir>/logs/<name>.out     each process's stdout: spans with OTEL_TRACES_EXPORTER=console

The first start picks free ports and writes cluster.json; later starts reuse it, so `samsa up`
on the same directory restarts the same cluster (same ids, same addresses, same data). Each
service is spawned as `python -m samsa.services.<service>` — the CLI never imports a service —
and is stopped by PID: SIGTERM, then SIGKILL after a grace period. Nothing here is pure; it is
the composition of processes, kept small.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import grpc

from samsa.cli.cluster_spec import (
    HOST,
    BrokerSpec,
    ClusterSpec,
    ControllerSpec,
    CoordinatorSpec,
    read_spec,
)
from samsa.cli.cluster_tls import ensure_certificates, ensure_sasl_credentials, open_channel
from samsa.cli.service_commands import broker_command, controller_command, coordinator_command
from samsa.v1 import controller_pb2, controller_pb2_grpc

STOP_GRACE_S = 10.0
# How much of the end of a log `log_tail` reads: its 20 lines, however long the log has grown.
LOG_TAIL_BYTES = 64 * 1024
# Settings that name one process's own resource: inherited from the launcher's environment (an
# image sets SAMSA_HEALTH_FILE for its one service, compose SAMSA_METRICS_LISTEN, a shell an
# application's OTEL_SERVICE_NAME), every local service would share it (one file kept fresh by
# all; one port, which all but the first fail to bind, and stop; one name on every span).
PER_PROCESS_ENV = frozenset({"SAMSA_HEALTH_FILE", "SAMSA_METRICS_LISTEN", "OTEL_SERVICE_NAME"})


def child_environment(environ: dict[str, str]) -> dict[str, str]:
    """The environment a launched service gets: the launcher's, without PER_PROCESS_ENV."""
    return {key: value for key, value in environ.items() if key not in PER_PROCESS_ENV}


def free_ports(count: int, taken: Iterable[int] = ()) -> list[int]:
    """Ports the kernel hands out now, none of them in `taken`: held open together so that they
    differ. Once closed, the kernel may hand a port out again, so ports chosen for one cluster
    must come from one call, or name the others as `taken` (a coordinator given the port a
    controller's Raft was about to bind left the quorum without a leader)."""
    taken = set(taken)
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((HOST, 0))
            port = sock.getsockname()[1]
            if port not in taken:
                ports.append(port)
        return ports


def new_cluster_spec(
    controllers: int,
    brokers: int,
    settings: dict[str, str] | None = None,
    coordinators: int = 0,
    tls: bool = False,
    authorizer: bool = False,
    sasl: bool = False,
) -> ClusterSpec:
    """Every process with a public and an internal gRPC port (cluster_spec.py); `tls`: all of
    them serve TLS and require client certificates; `authorizer`: and enforce ACLs; `sasl`: a
    SASL/SCRAM login over TLS instead of client certificates."""
    ports = iter(free_ports(3 * controllers + 2 * brokers))
    spec = ClusterSpec(
        tuple(
            ControllerSpec(i, next(ports), next(ports), internal_port=next(ports))
            for i in range(1, controllers + 1)
        ),
        tuple(BrokerSpec(i, next(ports), internal_port=next(ports)) for i in range(1, brokers + 1)),
        dict(settings or {}),
        tls=tls,
        authorizer=authorizer,
        sasl=sasl,
    )
    return replace(spec, coordinators=new_coordinator_specs(coordinators, spec.ports))


def new_coordinator_specs(count: int, taken: Iterable[int]) -> tuple[CoordinatorSpec, ...]:
    """`count` coordinators on ports (public and internal) free now and not among `taken`."""
    ports = iter(free_ports(2 * count, taken))
    return tuple(
        CoordinatorSpec(i, next(ports), internal_port=next(ports)) for i in range(1, count + 1)
    )


def load_or_create(
    data_dir: Path,
    controllers: int,
    brokers: int,
    settings: dict[str, str] | None = None,
    *,
    coordinators: int = 0,
    tls: bool = False,
    authorizer: bool = False,
    sasl: bool = False,
) -> ClusterSpec:
    """The cluster of `data_dir`: the one it already holds, or a new one with fresh ports (and,
    with `tls`, its certificates: cluster_tls.py).

    Coordinators keep no state, so an existing cluster may be started with another number of
    them: their ids and ports are chosen again and written back. Its TLS may not change: a
    cluster made with TLS started without it (or the reverse) is refused, as another topology
    is, rather than a flag silently overridden by the stored cluster (whose clients would then
    need settings the command line did not ask for)."""
    tls = tls or sasl  # SASL's ticket travels over TLS only
    if authorizer and not tls:
        raise ValueError(
            "--authorizer needs --tls: ACLs name principals by their client certificates, and "
            "without TLS every caller is User:ANONYMOUS"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    ensure_secret(data_dir / "cluster.secret")
    spec_file = data_dir / "cluster.json"
    if spec_file.exists():
        spec = read_spec(spec_file)
        if (len(spec.controllers), len(spec.brokers)) != (controllers, brokers):
            raise ValueError(
                f"{data_dir} holds a cluster of {len(spec.controllers)} controllers and "
                f"{len(spec.brokers)} brokers; start it with --controllers "
                f"{len(spec.controllers)} --brokers {len(spec.brokers)} or use another --data-dir"
            )
        if spec.tls != tls:
            made, asked = ("with", "without") if spec.tls else ("without", "with")
            raise ValueError(
                f"{data_dir} holds a cluster made {made} --tls; start it {made} --tls as before, "
                f"or use another --data-dir for a cluster {asked} it"
            )
        if spec.authorizer != authorizer:
            made = "with" if spec.authorizer else "without"
            raise ValueError(
                f"{data_dir} holds a cluster made {made} --authorizer; start it {made} "
                "--authorizer as before, or use another --data-dir"
            )
        if spec.sasl != sasl:
            made = "with" if spec.sasl else "without"
            raise ValueError(
                f"{data_dir} holds a cluster made {made} --sasl; start it {made} --sasl as "
                "before, or use another --data-dir"
            )
        if len(spec.coordinators) != coordinators:
            others = replace(spec, coordinators=()).ports
            spec = replace(spec, coordinators=new_coordinator_specs(coordinators, others))
            spec_file.write_text(spec.to_json())
    else:
        spec = new_cluster_spec(controllers, brokers, settings, coordinators, tls, authorizer, sasl)
        spec_file.write_text(spec.to_json())
    ensure_certificates(spec, data_dir)
    ensure_sasl_credentials(spec, data_dir)
    return spec


def ensure_secret(path: Path) -> Path:
    """A random cluster secret, readable by its owner only, created once."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    return path


class LocalCluster:
    """The processes of one cluster; start/stop each by name ("controller-1", "broker-2",
    "coordinator-1")."""

    def __init__(self, spec: ClusterSpec, data_dir: Path) -> None:
        self.spec = spec
        self.data_dir = data_dir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.killed: set[str] = set()  # stopped on purpose (a test's kill): not a failure
        ensure_certificates(spec, data_dir)  # a spec not from load_or_create (a test's)
        ensure_sasl_credentials(spec, data_dir)

    def commands(self) -> dict[str, list[str]]:
        commands = {
            f"controller-{c.node_id}": controller_command(self.spec, c, self.data_dir)
            for c in self.spec.controllers
        }
        commands |= {
            f"broker-{b.broker_id}": broker_command(self.spec, b, self.data_dir)
            for b in self.spec.brokers
        }
        commands |= {
            f"coordinator-{c.coordinator_id}": coordinator_command(self.spec, c, self.data_dir)
            for c in self.spec.coordinators
        }
        return {
            name: command + self.spec.service_security(self.data_dir, name)
            for name, command in commands.items()
        }

    def start_all(self) -> None:
        for name in self.commands():
            self.start(name)

    def start(self, name: str) -> subprocess.Popen[bytes]:
        assert name not in self.processes or self.processes[name].poll() is not None
        log_dir = self.data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        # stderr holds the JSON log lines; stdout (console spans, OTEL_TRACES_EXPORTER=console)
        # goes to a file of its own, so that the two never interleave.
        with (
            open(log_dir / f"{name}.log", "ab") as log_file,
            open(log_dir / f"{name}.out", "ab") as out_file,
        ):
            process = subprocess.Popen(
                self.commands()[name],
                stdout=out_file,
                stderr=log_file,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in the terminal reaches `samsa up` only
                env=child_environment(dict(os.environ)),
            )
        self.processes[name] = process
        self.killed.discard(name)
        return process

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to one process (SIGKILL: a crash; SIGSTOP: a hang) and, for SIGKILL and
        SIGTERM, reap it."""
        process = self.processes[name]
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.killed.add(name)
        if process.poll() is None:
            process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            _wait_or_kill(process, STOP_GRACE_S)

    def exited(self) -> dict[str, int]:
        """Processes that have stopped on their own (not killed on purpose), with exit codes."""
        return {
            name: code
            for name, process in self.processes.items()
            if name not in self.killed and (code := process.poll()) is not None
        }

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the coordinators and brokers and wait for them (a controlled shutdown needs
        the quorum up), then the controllers; SIGKILL whatever is still running after the grace
        period."""
        deadline = time.monotonic() + grace_s
        for role in ("coordinator", "broker", "controller"):
            group = [p for name, p in self.processes.items() if name.startswith(role)]
            for process in group:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in group:
                _wait_or_kill(process, max(0.5, deadline - time.monotonic()))

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last `lines` lines of a process's log, read from the end of the file: the log
        is appended to across restarts and may be large (its last LOG_TAIL_BYTES at most)."""
        path = self.data_dir / "logs" / f"{name}.log"
        try:
            with open(path, "rb") as log:
                start = max(0, log.seek(0, os.SEEK_END) - LOG_TAIL_BYTES)
                log.seek(start)
                end = log.read()
        except FileNotFoundError:
            return ""
        kept = end.decode(errors="replace").splitlines()[1 if start else 0 :]  # no torn line
        return "\n".join(kept[-lines:])


class ClusterNotHealthyError(RuntimeError):
    """The cluster did not become healthy in time; the message says what was missing."""


def cluster_health(spec: ClusterSpec, data_dir: Path | None = None) -> tuple[bool, str]:
    """(healthy, what is missing): healthy = a controller is active and every broker and
    coordinator of the spec is registered and unfenced, as the active controller sees it. A TLS
    cluster is dialled with the client certificate of `data_dir`."""
    if spec.tls and data_dir is None:
        raise ValueError("a TLS cluster's health is asked with its data directory's certificates")
    security = spec.client_security(data_dir) if data_dir is not None else {}
    missing = "no controller answered"
    for controller in spec.controllers:
        with open_channel(controller.endpoint, security) as channel:
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            try:
                answer = stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=2)
            except grpc.RpcError as error:
                missing = f"controller-{controller.node_id}: {error.code().name}"
                continue
        if not any(c.is_active and c.node_id == controller.node_id for c in answer.controllers):
            # Only the active controller's view counts: a follower that just restarted may still
            # be replaying its journal and show brokers as they were.
            missing = "no active controller yet (Raft election)"
            continue
        unfenced = {b.broker_id for b in answer.brokers if not b.is_fenced}
        waiting = sorted(b.broker_id for b in spec.brokers if b.broker_id not in unfenced)
        live = {c.coordinator_id for c in answer.coordinators if not c.is_fenced}
        idle = sorted(c.coordinator_id for c in spec.coordinators if c.coordinator_id not in live)
        if not waiting and not idle:
            return True, ""
        missing = f"brokers not yet registered and unfenced: {waiting}"
        if not waiting:
            missing = f"coordinators not yet registered: {idle}"
    return False, missing


def wait_healthy(cluster: LocalCluster, timeout_s: float = 60.0) -> None:
    """Block until the cluster is healthy; raise if a process died or time ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if dead := cluster.exited():
            name = next(iter(dead))
            raise ClusterNotHealthyError(
                f"{name} exited with code {dead[name]}; its log ends with:\n"
                + cluster.log_tail(name)
            )
        healthy, missing = cluster_health(cluster.spec, cluster.data_dir)
        if healthy:
            return
        if time.monotonic() > deadline:
            raise ClusterNotHealthyError(f"not healthy after {timeout_s:.0f} s: {missing}")
        time.sleep(0.2)


def _wait_or_kill(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """Start every process and stop them all on the way out, whatever happens in between."""
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop_all()

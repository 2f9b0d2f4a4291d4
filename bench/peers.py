"""The benchmark's peers as OS processes: install Debian's `nats-server` and `redis-server` when
they are missing, start each on free loopback ports in a temporary directory, wait until it
answers, and stop it by PID at the end, whatever happened in between.

What each peer promises when it acknowledges a write, as configured here (Samsa at acks=1 promises
that the partition leader has written the batch to its log, i.e. to the OS page cache, not fsynced;
replication is what makes it durable, and there is no replication in these single-node runs):

- NATS JetStream, file storage (`-js -sd DIR`): the publish ack is sent after the message is
  appended to the stream's block file with write(2); the server fsyncs in the background (every
  two minutes by default) — the same promise as Samsa acks=1 without fsync.
- Redis Streams, `--appendonly yes --appendfsync no --save ""`: Redis writes the append-only file
  (write(2), no fsync) before it sends the replies of that event-loop turn, so an XADD reply also
  means "in the OS page cache" and survives a crash of the process — again Samsa's acks=1 promise.
  (`--appendonly no` would be memory only, a weaker promise and a flattered peer; RDB snapshots are
  off so that a fork does not land in the middle of a measurement.)

Neither peer compresses records: the Samsa columns with zstd have no peer counterpart.

For the replication bench, `start_nats_cluster` runs three JetStream servers as one cluster (each
with its own store directory, a route listener and routes to the two others, a shared cluster
name and a unique server name, as JetStream clustering requires). A stream with `num_replicas=3`
(R3) is a Raft group over the three: the publish ack is sent once a quorum (2 of 3) has stored
the message (written, fsynced in the background as above). Samsa's acks=all with a full ISR
waits for all three in-sync replicas (and min.insync.replicas=2 refuses writes below two).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from samsa.cli.launcher import free_ports

HOST = "127.0.0.1"
READY_TIMEOUT_S = 20.0
STOP_GRACE_S = 5.0
APT_TIMEOUT_S = 600.0

# Binary -> the Debian package that ships it.
DEBIAN_PACKAGES = {"nats-server": "nats-server", "redis-server": "redis-server"}


class PeerError(RuntimeError):
    """A peer could not be installed or did not come up; the message says why."""


@dataclass
class Peer:
    """One running peer server: its process, its client URL and where its files are."""

    name: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        scheme = "nats" if self.name.startswith("nats") else "redis"
        return f"{scheme}://{HOST}:{self.port}"

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


# --- installing ------------------------------------------------------------------------------


def missing_packages(binaries: dict[str, str] = DEBIAN_PACKAGES) -> list[str]:
    """The Debian packages whose binary is on neither PATH nor /usr/sbin and /usr/bin."""
    return [package for binary, package in binaries.items() if find_binary(binary) is None]


def find_binary(binary: str) -> str | None:
    """The path of `binary`; Debian puts servers in /usr/bin or /usr/sbin, not always on PATH."""
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/usr/bin:/sbin"
    return shutil.which(binary, path=path)


def apt_command(arguments: list[str], is_root: bool, has_sudo: bool) -> list[str]:
    """`apt-get ARGS` as root, or through sudo (non-interactive: no password prompt to hang on)."""
    command = ["apt-get", *arguments]
    if is_root:
        return command
    if not has_sudo:
        raise PeerError(
            f"not root and no sudo: install the peers by hand: sudo {' '.join(command)}"
        )
    return ["sudo", "-n", "env", "DEBIAN_FRONTEND=noninteractive", *command]


def ensure_installed(binaries: dict[str, str] = DEBIAN_PACKAGES) -> list[str]:
    """Install the missing peers with apt-get (running `apt-get update` first only when the install
    fails, e.g. on a fresh machine with no package lists). Returns what was installed."""
    packages = missing_packages(binaries)
    if not packages:
        return []
    is_root = os.geteuid() == 0
    has_sudo = shutil.which("sudo") is not None
    install = apt_command(["install", "-y", "-q", *packages], is_root, has_sudo)
    update = apt_command(["update", "-q"], is_root, has_sudo)
    environment = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    print(f"installing the benchmark's peers: {' '.join(packages)}", flush=True)
    for attempt in (install, update, install):
        result = subprocess.run(
            attempt, env=environment, capture_output=True, text=True, timeout=APT_TIMEOUT_S
        )
        if result.returncode == 0 and attempt is install:
            break
        if result.returncode != 0 and attempt is update:
            raise PeerError(f"{' '.join(update)} failed:\n{result.stderr[-2000:]}")
    else:
        raise PeerError(f"{' '.join(install)} failed:\n{result.stderr[-2000:]}")
    if still := missing_packages(binaries):
        raise PeerError(f"installed, yet still missing: {still}")
    return packages


# --- starting and stopping -------------------------------------------------------------------


def nats_server_name(port: int) -> str:
    """The server name of the JetStream server whose client port is `port`: stream infos name
    their leader by server name, and this is how a client finds the leader's URL again."""
    return f"bench-{port}"


def nats_port_of(server_name: str) -> int:
    """The client port a name from `nats_server_name` stands for."""
    prefix, _, port = server_name.rpartition("-")
    if prefix != "bench" or not port.isdigit():
        raise ValueError(f"not a bench server name: {server_name!r}")
    return int(port)


def nats_command(binary: str, port: int, store_dir: Path, monitor_port: int) -> list[str]:
    """One JetStream server with file storage under `store_dir`."""
    return [
        binary,
        "-a", HOST,
        "-p", str(port),
        "-m", str(monitor_port),  # /healthz: ready once JetStream is up
        "-js",
        "-sd", str(store_dir),
        "-n", nats_server_name(port),  # unique: JetStream clustering requires server names
    ]  # fmt: skip


@dataclass(frozen=True)
class NatsNodePorts:
    """The loopback ports of one server of a JetStream cluster."""

    client: int
    cluster: int  # the route listener the other servers dial
    monitor: int


def nats_cluster_commands(
    binary: str, nodes: list[NatsNodePorts], directory: Path, cluster_name: str = "bench-r3"
) -> list[list[str]]:
    """One command per server of a JetStream cluster: each stores under its own directory,
    listens for routes and dials the others' (full mesh, as nats-server's docs set up a
    cluster). JetStream clustering needs both a unique server name and a cluster name."""
    commands = []
    for index, node in enumerate(nodes):
        routes = ",".join(f"nats://{HOST}:{other.cluster}" for other in nodes if other is not node)
        store_dir = directory / f"node-{index + 1}" / "jetstream"
        clustering = [
            "--cluster_name", cluster_name,
            "--cluster", f"nats://{HOST}:{node.cluster}",
            "--routes", routes,
        ]  # fmt: skip
        commands.append([*nats_command(binary, node.client, store_dir, node.monitor), *clustering])
    return commands


def redis_command(binary: str, port: int, directory: Path) -> list[str]:
    """One Redis with its append-only file written but never fsynced (see the module docstring)."""
    return [
        binary,
        "--bind", HOST,
        "--port", str(port),
        "--dir", str(directory),
        "--save", "",
        "--appendonly", "yes",
        "--appendfsync", "no",
        "--daemonize", "no",
        "--protected-mode", "no",
        "--io-threads", "1",
    ]  # fmt: skip


def _spawn(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C reaches the bench, which then stops the peer
        )


def _nats_ready(port: int, monitor_port: int) -> bool:
    """The client port sends its INFO line and /healthz says JetStream is up."""
    try:
        with socket.create_connection((HOST, port), timeout=1) as sock:
            if not sock.recv(4096).startswith(b"INFO "):
                return False
        with socket.create_connection((HOST, monitor_port), timeout=1) as sock:
            sock.sendall(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        return answer.startswith(b"HTTP/1.") and b" 200 " in answer.split(b"\r\n", 1)[0]
    except OSError:
        return False


def _redis_ready(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _wait_ready(peer: Peer, probe: Callable[[], bool]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not probe():
        if (code := peer.process.poll()) is not None:
            raise PeerError(
                f"{peer.name} exited with code {code}; its log ends with:\n" + peer.log_tail()
            )
        if time.monotonic() > deadline:
            raise PeerError(
                f"{peer.name} not ready after {READY_TIMEOUT_S:.0f} s:\n" + peer.log_tail()
            )
        time.sleep(0.05)


def start_nats(directory: Path) -> Peer:
    """A JetStream server in `directory`, ready to take streams."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = find_binary("nats-server")
    if binary is None:
        raise PeerError("nats-server is not installed (ensure_installed() first)")
    port, monitor_port = free_ports(2)
    log_path = directory / "nats-server.log"
    process = _spawn(nats_command(binary, port, directory / "jetstream", monitor_port), log_path)
    peer = Peer("nats", port, directory, process, log_path, {"monitor_port": str(monitor_port)})
    try:
        _wait_ready(peer, lambda: _nats_ready(port, monitor_port))
    except BaseException:
        stop(peer)
        raise
    return peer


def start_nats_cluster(directory: Path, size: int = 3) -> list[Peer]:
    """`size` JetStream servers in one cluster under `directory`, each answering /healthz (which
    in a cluster also means the JetStream meta group has a leader). On any failure every server
    already started is stopped by PID before the error propagates."""
    binary = find_binary("nats-server")
    if binary is None:
        raise PeerError("nats-server is not installed (ensure_installed() first)")
    ports = iter(free_ports(3 * size))
    nodes = [NatsNodePorts(next(ports), next(ports), next(ports)) for _ in range(size)]
    commands = nats_cluster_commands(binary, nodes, directory)
    peers: list[Peer] = []
    try:
        for index, (node, command) in enumerate(zip(nodes, commands, strict=True)):
            node_dir = directory / f"node-{index + 1}"
            node_dir.mkdir(parents=True, exist_ok=True)
            log_path = node_dir / "nats-server.log"
            extra = {"monitor_port": str(node.monitor), "cluster_port": str(node.cluster)}
            process = _spawn(command, log_path)
            peers.append(Peer(f"nats-{index + 1}", node.client, node_dir, process, log_path, extra))
        for peer, node in zip(peers, nodes, strict=True):  # they start together, then elect
            _wait_ready(peer, lambda node=node: _nats_ready(node.client, node.monitor))
    except BaseException:
        for peer in peers:
            stop(peer)
        raise
    return peers


@contextlib.contextmanager
def running_nats_cluster(size: int = 3, install: bool = True) -> Iterator[list[Peer]]:
    """Install nats-server (if asked) and run a `size`-server JetStream cluster in a temporary
    directory for the duration; every server is stopped by PID on the way out."""
    if install:
        ensure_installed({"nats-server": DEBIAN_PACKAGES["nats-server"]})
    with tempfile.TemporaryDirectory(prefix="samsa-bench-nats-cluster-") as root:
        peers = start_nats_cluster(Path(root), size)
        try:
            yield peers
        finally:
            for peer in peers:
                stop(peer)


def start_redis(directory: Path) -> Peer:
    """A Redis server in `directory`, answering PING."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = find_binary("redis-server")
    if binary is None:
        raise PeerError("redis-server is not installed (ensure_installed() first)")
    (port,) = free_ports(1)
    log_path = directory / "redis-server.log"
    process = _spawn(redis_command(binary, port, directory), log_path)
    peer = Peer("redis", port, directory, process, log_path)
    try:
        _wait_ready(peer, lambda: _redis_ready(port))
    except BaseException:
        stop(peer)
        raise
    return peer


def stop(peer: Peer, grace_s: float = STOP_GRACE_S) -> int | None:
    """SIGTERM the peer's process by PID, SIGKILL it after `grace_s`; returns its exit code."""
    process = peer.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


STARTERS = {"nats": start_nats, "redis": start_redis}


@contextlib.contextmanager
def running_peers(
    names: tuple[str, ...] = ("nats", "redis"), install: bool = True
) -> Iterator[dict[str, Peer]]:
    """Install (if asked), start every named peer in one temporary directory, and stop them all
    by PID on the way out, whatever happens in between; the directory is removed after."""
    if install:
        ensure_installed(
            {
                binary: package
                for binary, package in DEBIAN_PACKAGES.items()
                if binary.split("-")[0] in names
            }
        )
    peers: dict[str, Peer] = {}
    with tempfile.TemporaryDirectory(prefix="samsa-bench-peers-") as root:
        try:
            for name in names:
                peers[name] = STARTERS[name](Path(root) / name)
            yield peers
        finally:
            for peer in peers.values():
                stop(peer)

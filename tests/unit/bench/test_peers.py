"""Goal: the peers start as configured (JetStream with file storage, Redis writing an append-only
file it never fsyncs, three JetStream servers forming one cluster), answer their clients, and are
stopped by PID even when the benchmark fails in the middle.

Method: the command builders are checked as data; a cluster start that fails half-way is driven
with fake processes; then, where Debian's nats-server and redis-server are installed (the bench
installs them; CI may not have), both are really started on loopback, spoken to with their Python
clients, and checked to be gone after the context exits.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import peers


def test_nats_runs_jetstream_with_file_storage_on_loopback(tmp_path: Path) -> None:
    command = peers.nats_command("/usr/sbin/nats-server", 4222, tmp_path / "js", 8222)
    assert "-js" in command
    assert command[command.index("-sd") + 1] == str(tmp_path / "js")
    assert command[command.index("-a") + 1] == "127.0.0.1"
    assert command[command.index("-p") + 1] == "4222"


NODES = [peers.NatsNodePorts(4222, 6222, 8222), peers.NatsNodePorts(4223, 6223, 8223),
         peers.NatsNodePorts(4224, 6224, 8224)]  # fmt: skip


def _flags(command: list[str]) -> dict[str, str]:
    """Each flag with the argument after it ("-js" takes none)."""
    return {
        flag: command[index + 1]
        for index, flag in enumerate(command)
        if flag.startswith("-") and flag != "-js"
    }


def test_nats_cluster_servers_store_apart_and_each_routes_to_the_two_others(
    tmp_path: Path,
) -> None:
    commands = peers.nats_cluster_commands("/usr/sbin/nats-server", NODES, tmp_path)
    assert len(commands) == 3
    flags = [_flags(command) for command in commands]
    assert all("-js" in command for command in commands)
    assert len({f["-sd"] for f in flags}) == 3  # each its own JetStream directory
    assert all(f["-sd"].startswith(str(tmp_path)) for f in flags)
    assert len({f["-n"] for f in flags}) == 3  # JetStream clustering needs unique server names
    assert {f["--cluster_name"] for f in flags} == {"bench-r3"}
    for node, f in zip(NODES, flags, strict=True):
        assert f["-p"] == str(node.client) and f["-m"] == str(node.monitor)
        assert f["--cluster"] == f"nats://127.0.0.1:{node.cluster}"
        routes = set(f["--routes"].split(","))
        assert routes == {f"nats://127.0.0.1:{o.cluster}" for o in NODES if o is not node}


def test_a_server_name_leads_back_to_its_client_port() -> None:
    assert peers.nats_port_of(peers.nats_server_name(4223)) == 4223
    for name in ("nats-4223", "bench-", "bench-x1"):
        with pytest.raises(ValueError, match="not a bench server name"):
            peers.nats_port_of(name)


class FakeProcess:
    """Enough of subprocess.Popen for peers.stop: running until signalled."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.signals: list[int] = []

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        self.returncode = -sig

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self.send_signal(9)


def test_a_cluster_that_fails_to_come_up_stops_every_server_it_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spawned: list[FakeProcess] = []

    def fake_spawn(command: list[str], log_path: Path) -> FakeProcess:
        spawned.append(FakeProcess(1000 + len(spawned)))
        return spawned[-1]

    def fake_wait_ready(peer: peers.Peer, probe: object) -> None:
        if peer.name == "nats-2":
            raise peers.PeerError("nats-2 not ready")

    monkeypatch.setattr(peers, "find_binary", lambda binary: f"/usr/sbin/{binary}")
    monkeypatch.setattr(peers, "_spawn", fake_spawn)
    monkeypatch.setattr(peers, "_wait_ready", fake_wait_ready)
    with pytest.raises(peers.PeerError, match="nats-2 not ready"):
        peers.start_nats_cluster(tmp_path, size=3)
    assert len(spawned) == 3
    assert all(process.signals == [peers.signal.SIGTERM] for process in spawned)


def test_redis_writes_its_aof_without_fsync_and_takes_no_snapshots(tmp_path: Path) -> None:
    command = peers.redis_command("/usr/bin/redis-server", 6379, tmp_path)
    settings = dict(zip(command[1::2], command[2::2], strict=True))
    assert settings["--appendonly"] == "yes"
    assert settings["--appendfsync"] == "no"
    assert settings["--save"] == ""
    assert settings["--bind"] == "127.0.0.1"
    assert settings["--dir"] == str(tmp_path)


def test_apt_goes_through_sudo_only_when_not_root() -> None:
    assert peers.apt_command(["install", "-y", "x"], is_root=True, has_sudo=False) == [
        "apt-get", "install", "-y", "x",
    ]  # fmt: skip
    through_sudo = peers.apt_command(["install", "-y", "x"], is_root=False, has_sudo=True)
    assert through_sudo[:2] == ["sudo", "-n"]  # never waits on a password prompt
    assert through_sudo[-4:] == ["apt-get", "install", "-y", "x"]
    with pytest.raises(peers.PeerError, match="sudo apt-get install"):
        peers.apt_command(["install", "-y", "x"], is_root=False, has_sudo=False)


def test_nothing_is_installed_when_nothing_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "find_binary", lambda binary: f"/usr/bin/{binary}")

    def no_apt(*args: object, **kwargs: object) -> None:
        raise AssertionError("apt-get must not run")

    monkeypatch.setattr(peers.subprocess, "run", no_apt)
    assert peers.ensure_installed() == []


def test_a_failed_install_updates_the_package_lists_and_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fresh machine has no package lists: the first install fails, `apt-get update` runs, the
    second install succeeds."""
    installed: set[str] = set()
    commands: list[list[str]] = []

    def fake_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        first_install = command[1] == "install" and len(commands) == 1
        if command[1] == "install" and not first_install:
            installed.update(command[4:])
        return subprocess.CompletedProcess(command, 100 if first_install else 0, "", "E: no lists")

    monkeypatch.setattr(peers.os, "geteuid", lambda: 0)
    monkeypatch.setattr(peers, "find_binary", lambda b: f"/usr/bin/{b}" if b in installed else None)
    monkeypatch.setattr(peers.subprocess, "run", fake_run)
    assert peers.ensure_installed() == ["nats-server", "redis-server"]
    assert [command[:2] for command in commands] == [
        ["apt-get", "install"], ["apt-get", "update"], ["apt-get", "install"],
    ]  # fmt: skip
    assert installed == {"nats-server", "redis-server"}


def test_missing_packages_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        peers, "find_binary", lambda binary: None if binary == "nats-server" else "/usr/bin/x"
    )
    assert peers.missing_packages() == ["nats-server"]


installed = pytest.mark.skipif(
    bool(peers.missing_packages()), reason="nats-server or redis-server not installed"
)


@installed
def test_peers_answer_and_are_stopped_by_pid_even_after_a_failure() -> None:
    redis = pytest.importorskip("redis")  # the `bench` extra
    pytest.importorskip("nats")
    from bench.nats_clients import nats_produce

    started: dict[str, peers.Peer] = {}
    with (
        pytest.raises(RuntimeError, match="the benchmark failed"),
        peers.running_peers(install=False) as running,
    ):
        started.update(running)
        client = redis.Redis.from_url(running["redis"].url)
        try:
            assert client.ping() is True
            assert client.config_get("appendfsync") == {"appendfsync": "no"}
        finally:
            client.close()
        assert nats_produce(running["nats"].url, n=10, size=100)["records"] == 10
        raise RuntimeError("the benchmark failed")
    assert set(started) == {"nats", "redis"}
    for peer in started.values():
        assert peer.process.poll() is not None, f"{peer.name} (pid {peer.process.pid}) still runs"
        assert not peer.directory.exists()  # the temporary directory went with it

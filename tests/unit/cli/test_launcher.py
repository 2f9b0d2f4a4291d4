"""Goal: `samsa up` restarts the same cluster from the same data directory, keeps the cluster
secret private, and builds the service command lines the services parse.

Method: the launcher's file handling and command building, on tmp_path; no process is started.
"""

from __future__ import annotations

import json
import stat
import tracemalloc
from pathlib import Path
from typing import ClassVar

import pytest

from samsa.cli import launcher
from samsa.cli.launcher import ClusterSpec, LocalCluster, load_or_create, new_cluster_spec
from samsa.cli.service_commands import broker_command, controller_command, coordinator_command
from samsa.cli.up import up


def test_a_second_start_reuses_ids_ports_and_secret(tmp_path: Path) -> None:
    first = load_or_create(tmp_path, 3, 2)
    secret = (tmp_path / "cluster.secret").read_text()
    second = load_or_create(tmp_path, 3, 2)
    assert second == first
    assert (tmp_path / "cluster.secret").read_text() == secret
    ports = [c.grpc_port for c in first.controllers] + [c.raft_port for c in first.controllers]
    ports += [b.grpc_port for b in first.brokers]
    assert len(set(ports)) == len(ports) == 8


def test_the_secret_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    load_or_create(tmp_path, 1, 1)
    mode = stat.S_IMODE((tmp_path / "cluster.secret").stat().st_mode)
    assert mode == 0o600
    assert len((tmp_path / "cluster.secret").read_text().strip()) >= 32


def test_a_different_topology_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    load_or_create(tmp_path, 3, 3)
    with pytest.raises(ValueError, match="--controllers 3 --brokers 3"):
        load_or_create(tmp_path, 1, 3)


@pytest.mark.parametrize(
    "text",
    ["{}", '{"controllers": [{"node_id": 1, "grpc_port": 1}], "brokers": []}', "[1, 2]", "nope"],
)
def test_a_cluster_json_samsa_up_did_not_write_is_one_line(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another program's JSON, an older layout or a torn file in --data-dir: `samsa up` says
    which file in one line (exit 2) and starts nothing, instead of a KeyError's traceback."""
    (tmp_path / "cluster.json").write_text(text)
    with pytest.raises(ValueError, match=r"cluster\.json is not a cluster\.json `samsa up` wrote"):
        load_or_create(tmp_path, 1, 1)
    assert up(tmp_path, 1, 1, coordinators=0) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"samsa up: {tmp_path / 'cluster.json'} is not a cluster.json")
    assert len(error.strip().splitlines()) == 1
    assert not (tmp_path / "logs").exists()  # no process was started


def test_the_spec_survives_json() -> None:
    spec = new_cluster_spec(3, 3, {"broker.session.timeout.ms": "1500"})
    assert ClusterSpec.from_json(spec.to_json()) == spec
    assert spec.bootstrap_servers.count(",") == 2


def test_commands_name_every_peer_and_the_controllers(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 3, 1)
    first = spec.controllers[0]
    command = controller_command(spec, first, tmp_path)
    peers = command[command.index("--peers") + 1].split(",")
    assert sorted(p.split("=")[0] for p in peers) == ["2", "3"]
    assert all("@127.0.0.1:" in p for p in peers)
    # each peer with its internal listener, which redirects name for the members
    assert all(p.count("@") == 2 for p in peers)
    assert command[command.index("--internal-listeners") + 1] == first.internal_endpoint
    assert command[command.index("--secret-file") + 1] == str(tmp_path / "cluster.secret")
    broker = broker_command(spec, spec.brokers[0], tmp_path)
    # members dial the controllers' internal listeners; clients get the public ones
    assert broker[broker.index("--controllers") + 1] == spec.member_bootstrap_servers
    assert spec.member_bootstrap_servers == ",".join(
        c.internal_endpoint or "" for c in spec.controllers
    )
    assert spec.bootstrap_servers == ",".join(c.endpoint for c in spec.controllers)
    assert broker[broker.index("--internal-listeners") + 1] == spec.brokers[0].internal_endpoint
    assert broker[broker.index("--secret-file") + 1] == str(tmp_path / "cluster.secret")


def test_the_internal_topics_get_the_clusters_replication_factor_and_settings(
    tmp_path: Path,
) -> None:
    # Kafka's default RF of __consumer_offsets and __transaction_state is 3; a one-broker local
    # cluster uses 1 for both, and settings under Kafka's names reach the controller's flags.
    from samsa.services.controller.controller_config import ControllerConfig
    from samsa.services.runtime.config import ConfigError
    from samsa.services.runtime.config_loading import load

    settings = {"offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "2"}
    spec = load_or_create(tmp_path, 1, 1, settings)
    command = controller_command(spec, spec.controllers[0], tmp_path)
    assert command[command.index("--offsets-topic-replication-factor") + 1] == "1"
    assert command[command.index("--transaction-state-log-replication-factor") + 1] == "1"
    config = load(ControllerConfig, "controller", command[3:], {})  # past `python -m ...`
    assert (config.offsets_topic_num_partitions, config.offsets_topic_replication_factor) == (4, 1)
    assert config.transaction_state_log_num_partitions == 2
    assert config.transaction_state_log_replication_factor == 1
    with pytest.raises(ConfigError, match=r"transaction\.state\.log\.num\.partitions"):
        load(
            ControllerConfig,
            "controller",
            [*command[3:], "--transaction-state-log-num-partitions", "0"],
            {},
        )


def test_the_coordinators_transaction_settings_reach_its_flags(tmp_path: Path) -> None:
    from samsa.services.coordinator.coordinator_config import CoordinatorConfig
    from samsa.services.coordinator.transaction_state import TRANSACTION_TIMEOUT_MS_MAX
    from samsa.services.runtime.config import ConfigError
    from samsa.services.runtime.config_loading import load

    def parse_args(argv: list[str]) -> CoordinatorConfig:
        return load(CoordinatorConfig, "coordinator", argv, {})

    spec = load_or_create(tmp_path, 1, 1, {"transaction.max.timeout.ms": "3000"}, coordinators=1)
    command = coordinator_command(spec, spec.coordinators[0], tmp_path)
    assert parse_args(command[3:]).transaction_max_timeout_ms == 3000
    without = load_or_create(tmp_path / "default", 1, 1, coordinators=1)
    default = coordinator_command(without, without.coordinators[0], tmp_path / "default")
    assert parse_args(default[3:]).transaction_max_timeout_ms == TRANSACTION_TIMEOUT_MS_MAX
    with pytest.raises(ConfigError, match=r"transaction\.max\.timeout\.ms"):
        parse_args([*command[3:], "--transaction-max-timeout-ms", "0"])


def test_every_command_the_launcher_builds_loads_as_its_services_config(tmp_path: Path) -> None:
    # The launcher passes flags only; each service's loader must accept them as they are, and
    # every address it publishes is the loopback one it listens on.
    from samsa.services.broker.broker_config import BrokerConfig
    from samsa.services.controller.controller_config import ControllerConfig
    from samsa.services.coordinator.coordinator_config import CoordinatorConfig
    from samsa.services.runtime.config_loading import load

    settings = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "300"}
    spec = load_or_create(tmp_path, 3, 2, settings, coordinators=1)
    controller = load(
        ControllerConfig,
        "controller",
        controller_command(spec, spec.controllers[0], tmp_path)[3:],
        {},
    )
    assert controller.advertised_listener == spec.controllers[0].endpoint
    assert [peer.node_id for peer in controller.peers] == [2, 3]
    assert controller.internal_advertised_listener == spec.controllers[0].internal_endpoint
    assert [peer.internal_endpoint for peer in controller.peers] == [
        c.internal_endpoint for c in spec.controllers[1:]
    ]
    assert controller.broker_session_timeout_ms == 3000
    broker = load(BrokerConfig, "broker", broker_command(spec, spec.brokers[1], tmp_path)[3:], {})
    assert (broker.broker_id, broker.advertised_listener) == (2, spec.brokers[1].endpoint)
    assert broker.heartbeat_interval_ms == 300
    assert ",".join(broker.controllers) == spec.member_bootstrap_servers
    assert broker.internal_advertised_listener == spec.brokers[1].internal_endpoint
    coordinator = load(
        CoordinatorConfig,
        "coordinator",
        coordinator_command(spec, spec.coordinators[0], tmp_path)[3:],
        {},
    )
    assert coordinator.advertised_listener == spec.coordinators[0].endpoint
    assert coordinator.internal_advertised_listener == spec.coordinators[0].internal_endpoint
    assert ",".join(coordinator.controllers) == spec.member_bootstrap_servers


class ReusingSocket:
    """A socket whose kernel hands out ports from a script, repeats included."""

    script: ClassVar[list[int]] = []

    def __init__(self, *_: object) -> None:
        self.port = 0

    def __enter__(self) -> ReusingSocket:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def bind(self, _: object) -> None:
        self.port = ReusingSocket.script.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_coordinators_never_get_a_port_the_cluster_already_has(monkeypatch) -> None:
    # The kernel may hand a closed port out again: the coordinator's must skip the cluster's.
    ReusingSocket.script = [4001, 4002, 4003, 4004, 4005, 4002, 4006, 4007, 4008, 4009]
    monkeypatch.setattr(launcher.socket, "socket", ReusingSocket)
    spec = launcher.new_cluster_spec(1, 1, coordinators=2)
    controller = spec.controllers[0]
    assert (controller.grpc_port, controller.raft_port, controller.internal_port) == (
        4001,
        4002,
        4003,
    )
    assert (spec.brokers[0].grpc_port, spec.brokers[0].internal_port) == (4004, 4005)
    assert [(c.grpc_port, c.internal_port) for c in spec.coordinators] == [
        (4006, 4007),
        (4008, 4009),
    ]
    assert ReusingSocket.script == []


def test_a_per_process_setting_is_not_handed_to_every_service() -> None:
    """Inside an image that sets SAMSA_HEALTH_FILE for its one service, `samsa up` would make
    every local service keep the same file fresh: a dead one would hide behind the others."""
    environ = {"SAMSA_HEALTH_FILE": "/run/samsa/healthy", "SAMSA_LOG_LEVEL": "debug", "PATH": "/x"}
    assert launcher.child_environment(environ) == {"SAMSA_LOG_LEVEL": "debug", "PATH": "/x"}


def test_a_log_tail_reads_the_end_of_the_file_only(tmp_path: Path) -> None:
    """A process's log grows across restarts (appended to); when it dies, `samsa up` shows its
    last lines: read from the end, not the whole file into memory at once."""
    cluster = launcher.LocalCluster(new_cluster_spec(1, 1), tmp_path)
    (tmp_path / "logs").mkdir()
    line = b'{"level": "INFO", "msg": "%s"}\n' % (b"x" * 200)
    with open(tmp_path / "logs" / "broker-1.log", "wb") as log:
        for _ in range(100):
            log.write(line * 1000)  # 23 MB in all
        log.write(b'{"level": "ERROR", "msg": "the last words"}')  # no newline at the end
    tracemalloc.start()
    try:
        tail = cluster.log_tail("broker-1", 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tail.splitlines() == [line.decode().strip()] * 2 + [
        '{"level": "ERROR", "msg": "the last words"}'
    ]
    assert peak < 2_000_000, f"{peak:,} bytes to show 3 lines"
    assert cluster.log_tail("broker-2") == "", "no log yet"


def test_a_cluster_json_from_before_internal_listeners_keeps_one_listener(tmp_path: Path) -> None:
    # A cluster.json written before internal listeners existed names no internal ports: its
    # processes start as before (one listener each, members dialling the public ones).
    spec = load_or_create(tmp_path, 2, 1, coordinators=1)
    data = json.loads(spec.to_json())
    for role in ("controllers", "brokers", "coordinators"):
        for process in data[role]:
            del process["internal_port"]
    (tmp_path / "cluster.json").write_text(json.dumps(data))
    old = load_or_create(tmp_path, 2, 1, coordinators=1)
    assert old.member_bootstrap_servers == old.bootstrap_servers
    commands = LocalCluster(old, tmp_path).commands()
    assert all("--internal-listeners" not in command for command in commands.values())
    peers = controller_command(old, old.controllers[0], tmp_path)
    assert peers[peers.index("--peers") + 1].count("@") == 1

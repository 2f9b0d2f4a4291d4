"""Goal: the service config loader (runtime/config.py) picks each key from the right place, types
it, and refuses every bad input with one line naming the key, where it came from and what is
expected.

Method: call the pure `resolve` with hand-made layers (flags, environment, file text) for the
three service configs; `config_loading.load` only for the command line and the --config path.
No files, no ports."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from samsa.common import limits
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.controller.controller_config import ControllerConfig, Peer, parse_voters
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.runtime import config
from samsa.services.runtime.config import ConfigError, Setting
from samsa.services.runtime.config_loading import SERVICE_CONFIGS, load

REPO = Path(__file__).resolve().parents[3]

BROKER_REQUIRED = {
    "broker.id": "1",
    "listeners": "127.0.0.1:9093",
    "controller.quorum.bootstrap.servers": "c1:9090,c2:9090",
    "log.dir": "/data",
    "cluster.secret.file": "/run/secret",
}


def layer(values: dict[str, str], origin: str) -> dict[str, Setting]:
    return {name: Setting(text, origin, name) for name, text in values.items()}


def broker(
    flags: dict[str, str] | None = None,
    environ: dict[str, str] | None = None,
    file: str = "",
) -> BrokerConfig:
    """A BrokerConfig from the three layers; the required keys default to the file layer."""
    file_settings = layer(BROKER_REQUIRED, "defaults of this test") | config.parse_properties(
        file, "broker.properties"
    )
    keys = config.keys_of(BrokerConfig)
    config.check_file_keys(file_settings, keys, "broker")
    others = frozenset(k.name for k in config.keys_of(ControllerConfig))
    return config.resolve(
        BrokerConfig,
        flags=layer(flags or {}, "command line"),
        environment=config.environment_settings(environ or {}, keys, "broker", others),
        file=file_settings,
    )


# --- precedence and types ------------------------------------------------------------------


def test_a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() -> None:
    file = "broker.rack=file-rack\nbroker.heartbeat.interval.ms=400\nreplica.lag.time.max.ms=500\n"
    environ = {"SAMSA_BROKER_HEARTBEAT_INTERVAL_MS": "300", "SAMSA_REPLICA_LAG_TIME_MAX_MS": "600"}
    loaded = broker(flags={"replica.lag.time.max.ms": "700"}, environ=environ, file=file)
    assert loaded.replica_lag_time_max_ms == 700  # flag over environment and file
    assert loaded.heartbeat_interval_ms == 300  # environment over file
    assert loaded.rack == "file-rack"  # file over default
    assert loaded.log_scrub_interval_ms == 60 * 60 * 1000  # default


def test_values_are_typed() -> None:
    loaded = broker(environ={"SAMSA_BROKER_ID": " 7 ", "SAMSA_METRICS_LISTEN": ":9400"})
    assert loaded.broker_id == 7
    assert loaded.controllers == ("c1:9090", "c2:9090")
    assert loaded.metrics_listen == ":9400"
    assert broker(environ={"SAMSA_METRICS_LISTEN": ""}).metrics_listen is None


def test_the_environment_names_are_the_keys_upper_cased_with_underscores() -> None:
    names = {k.env_name for k in config.keys_of(BrokerConfig)}
    assert {"SAMSA_BROKER_ID", "SAMSA_ADVERTISED_LISTENERS", "SAMSA_LOG_DIR"} <= names
    assert config.env_name("controller.quorum.voters") == "SAMSA_CONTROLLER_QUORUM_VOTERS"


def test_the_properties_file_takes_comments_blank_lines_and_either_separator() -> None:
    text = "# a comment\n! another\n\n  broker.rack = r1  \nlog.dir: /var/lib/samsa\n"
    settings = config.parse_properties(text, "b.properties")
    assert {name: s.text for name, s in settings.items()} == {
        "broker.rack": "r1",
        "log.dir": "/var/lib/samsa",
    }
    assert settings["log.dir"].origin == "b.properties line 5"
    # The value keeps what follows the first separator (an address has a colon).
    assert config.parse_properties("listeners=0.0.0.0:9093", "f")["listeners"].text == (
        "0.0.0.0:9093"
    )


# --- listeners and advertised.listeners ------------------------------------------------------


def test_the_advertised_listener_defaults_to_the_listener() -> None:
    assert broker().advertised_listener == "127.0.0.1:9093"
    loaded = broker(
        environ={"SAMSA_LISTENERS": "0.0.0.0:9093", "SAMSA_ADVERTISED_LISTENERS": "broker-1:9093"}
    )
    assert (loaded.listeners, loaded.advertised_listener) == ("0.0.0.0:9093", "broker-1:9093")


def test_a_wildcard_listener_without_an_advertised_one_names_both_keys() -> None:
    with pytest.raises(ConfigError) as raised:
        broker(environ={"SAMSA_LISTENERS": "0.0.0.0:9093"})
    message = str(raised.value)
    assert "listeners='0.0.0.0:9093'" in message
    assert "advertised.listeners" in message
    assert "SAMSA_LISTENERS (environment)" in message and "advertised.listeners: not set" in message
    for wildcard in ("[::]:9093", ":9093"):
        with pytest.raises(ConfigError, match=r"advertised\.listeners"):
            broker(flags={"listeners": wildcard})


def test_a_listener_may_ask_for_any_free_port_but_an_advertised_one_may_not() -> None:
    assert broker(flags={"listeners": "127.0.0.1:0"}).listeners == "127.0.0.1:0"
    with pytest.raises(ConfigError, match=r"advertised\.listeners must be host:port with a port"):
        broker(environ={"SAMSA_ADVERTISED_LISTENERS": "broker-1:0"})
    # What a service on any free port advertises once bound: that port (it registered
    # 127.0.0.1:0, which nobody can dial); an address with a port of its own is kept.
    assert config.with_bound_port("127.0.0.1:0", 40123) == "127.0.0.1:40123"
    assert config.with_bound_port("[::1]:0", 40123) == "[::1]:40123"
    assert config.with_bound_port("broker-1:9093", 40123) == "broker-1:9093"


def test_an_advertised_listener_must_be_dialable() -> None:
    with pytest.raises(ConfigError) as raised:
        broker(environ={"SAMSA_ADVERTISED_LISTENERS": "0.0.0.0:9093"})
    assert str(raised.value) == (
        "SAMSA_ADVERTISED_LISTENERS='0.0.0.0:9093' (environment): advertised.listeners must be "
        "host:port with a host others can reach, not a wildcard"
    )


@pytest.mark.parametrize("bad", ["broker-1", "broker-1:-1", "broker-1:99999", "::1:9093", "h:x"])
def test_a_malformed_listener_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^--listen|^listeners"):
        broker(flags={"listeners": bad})


# --- errors: each names the key, where it came from, what is expected -------------------------


def test_a_bad_value_from_each_layer_says_where_it_came_from() -> None:
    with pytest.raises(ConfigError) as raised:
        broker(environ={"SAMSA_BROKER_ID": "x"})
    assert str(raised.value) == (
        "SAMSA_BROKER_ID='x' (environment): broker.id must be an integer from 0 to 2147483647"
    )
    with pytest.raises(ConfigError) as raised:
        broker(file="\nbroker.heartbeat.interval.ms=5\n")
    assert str(raised.value) == (
        "broker.heartbeat.interval.ms='5' (broker.properties line 2): "
        "broker.heartbeat.interval.ms must be an integer >= 10"
    )
    with pytest.raises(ConfigError) as raised:
        load(BrokerConfig, "broker", [*_broker_flags(), "--broker-id", "-1"], {})
    assert str(raised.value) == (
        "--broker-id='-1' (command line): broker.id must be an integer from 0 to 2147483647"
    )


@pytest.mark.parametrize(
    ("config_class", "name"),
    [
        (BrokerConfig, "broker.id"),
        (ControllerConfig, "node.id"),
        (CoordinatorConfig, "coordinator.id"),
    ],
)
def test_a_process_id_beyond_int32_is_refused_at_start(config_class: type, name: str) -> None:
    # The ids travel as protobuf int32: 2**31 was accepted, and a broker then failed at its
    # first RegisterBroker ("Value out of range"), long after starting.
    (spec,) = [k for k in config.keys_of(config_class) if k.name == name]
    assert spec.parse("2147483647") == 2**31 - 1
    with pytest.raises(config.ValueProblem, match=r"^be an integer from 0 to 2147483647$"):
        spec.parse("2147483648")
    with pytest.raises(config.ValueProblem, match=r"^list id=raft-host:port@grpc-host:port"):
        parse_voters("2147483648=h:1@h:2")


def test_a_missing_required_key_says_every_way_to_set_it() -> None:
    with pytest.raises(ConfigError) as raised:
        flags = ["--listen", "h:1", "--secret-file", "s", "--controllers", "c:1", "--data-dir", "d"]
        load(BrokerConfig, "broker", flags, {})
    assert str(raised.value) == (
        "broker.id is required: set --broker-id, SAMSA_BROKER_ID, or broker.id= in the "
        "--config file"
    )


def test_unknown_keys_in_the_file_are_refused_with_the_closest_key() -> None:
    with pytest.raises(ConfigError) as raised:
        broker(file="advertised.listener=broker-1:9093")
    assert str(raised.value) == (
        "advertised.listener (broker.properties line 1): not a broker key; "
        "did you mean advertised.listeners?"
    )
    with pytest.raises(ConfigError, match=r"^zzz \(broker.properties line 1\): not a broker key$"):
        broker(file="zzz=1")
    # A controller key in a broker's file is a mistake too: each service has its own file.
    with pytest.raises(ConfigError, match=r"^node\.id .*not a broker key"):
        broker(file="node.id=1")


def test_unknown_samsa_variables_are_refused_but_shared_ones_are_not() -> None:
    with pytest.raises(ConfigError) as raised:
        broker(environ={"SAMSA_BROKER_RAKC": "r1"})
    assert str(raised.value) == (
        "SAMSA_BROKER_RAKC (environment): not a broker setting; did you mean SAMSA_BROKER_RACK?"
    )
    # Another service's keys (one environment for a whole deployment), other SAMSA_ variables
    # (logging, fault injection, clients) and non-SAMSA variables are left alone.
    shared = {
        "SAMSA_NODE_ID": "1",
        "SAMSA_LOG_LEVEL": "DEBUG",
        "SAMSA_BOOTSTRAP": "b:1",
        "SAMSA_SPARK_DRIVER_PGID": "1",
        "BROKER_ID": "x",
    }
    assert broker(environ=shared).broker_id == 1


def test_the_properties_file_refuses_malformed_lines_and_repeated_keys() -> None:
    with pytest.raises(ConfigError, match=r"^f line 2: 'broker.id 1' is not key=value$"):
        config.parse_properties("# ok\nbroker.id 1\n", "f")
    with pytest.raises(ConfigError, match=r"^f line 1: '=1' has no key before '='$"):
        config.parse_properties("=1", "f")
    with pytest.raises(ConfigError, match=r"^f line 3: broker.id is set twice \(also f line 1\)$"):
        config.parse_properties("broker.id=1\n\nbroker.id=2", "f")


def test_an_unreadable_config_file_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^--config /nonexistent/b.properties: cannot read it"):
        load(BrokerConfig, "broker", ["--config", "/nonexistent/b.properties"], {})


def test_a_config_file_that_is_not_text_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "b.properties"
    path.write_bytes(b"broker.id=1\n\xff\n")
    with pytest.raises(ConfigError, match=rf"^--config {path}: cannot read it \(not UTF-8 text"):
        load(BrokerConfig, "broker", ["--config", str(path)], {})


def test_a_relation_between_keys_names_them_and_where_each_was_set() -> None:
    with pytest.raises(ConfigError) as raised:
        load(
            CoordinatorConfig,
            "coordinator",
            ["--coordinator-id", "1", "--listen", "h:1", "--controllers", "c:1"],
            {"SAMSA_CLUSTER_SECRET_FILE": "/s", "SAMSA_COORDINATOR_HEARTBEAT_INTERVAL_MS": "9000"},
        )
    assert str(raised.value) == (
        "coordinator.session.timeout.ms must exceed coordinator.heartbeat.interval.ms "
        "(coordinator.session.timeout.ms: default; coordinator.heartbeat.interval.ms: "
        "SAMSA_COORDINATOR_HEARTBEAT_INTERVAL_MS (environment))"
    )


def test_choices_and_metrics_addresses_are_checked() -> None:
    coordinator_flags = ["--coordinator-id", "1", "--listen", "h:1", "--controllers", "c:1"]
    coordinator_flags += ["--secret-file", "/s"]
    with pytest.raises(
        ConfigError, match=r"group\.consumer\.assignor must be one of range, roundrobin, uniform$"
    ):
        load(
            CoordinatorConfig,
            "coordinator",
            coordinator_flags,
            {"SAMSA_GROUP_CONSUMER_ASSIGNOR": "x"},
        )
    with pytest.raises(ConfigError, match=r"metrics\.listen must be HOST:PORT, :PORT or PORT"):
        broker(environ={"SAMSA_METRICS_LISTEN": "h:port"})


# --- the controller's quorum --------------------------------------------------------------


def controller(environ: dict[str, str]) -> ControllerConfig:
    base = {
        "SAMSA_NODE_ID": "1",
        "SAMSA_LISTENERS": "0.0.0.0:9090",
        "SAMSA_ADVERTISED_LISTENERS": "controller-1:9090",
        "SAMSA_RAFT_ADDRESS": "controller-1:9091",
        "SAMSA_METADATA_LOG_DIR": "/data",
        "SAMSA_CLUSTER_SECRET_FILE": "/s",
    }
    return load(ControllerConfig, "controller", [], base | environ)


def test_one_voters_list_serves_every_controller() -> None:
    voters = ",".join(f"{i}=controller-{i}:9091@controller-{i}:9090" for i in (1, 2, 3))
    loaded = controller({"SAMSA_CONTROLLER_QUORUM_VOTERS": voters})
    assert loaded.peers == (
        Peer(2, "controller-2:9091", "controller-2:9090"),
        Peer(3, "controller-3:9091", "controller-3:9090"),
    )
    assert loaded.advertised_listener == "controller-1:9090"


def test_the_voters_list_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"controller.quorum.voters must list id=raft-host"):
        controller({"SAMSA_CONTROLLER_QUORUM_VOTERS": "2=controller-2:9091"})
    with pytest.raises(ConfigError, match="lists a node id twice"):
        controller({"SAMSA_CONTROLLER_QUORUM_VOTERS": "2=a:1@a:2,2=b:1@b:2"})
    with pytest.raises(ConfigError) as raised:
        controller({"SAMSA_CONTROLLER_QUORUM_VOTERS": "1=elsewhere:9091@controller-1:9090"})
    assert "raft.address says controller-1:9091" in str(raised.value)
    assert "raft.address: SAMSA_RAFT_ADDRESS (environment)" in str(raised.value)


def test_the_flags_of_before_keep_their_meaning() -> None:
    loaded = load(
        ControllerConfig,
        "controller",
        [
            *("--node-id", "2", "--listen", "127.0.0.1:1", "--raft-address", "127.0.0.1:2"),
            *("--peers", "1=127.0.0.1:3@127.0.0.1:4", "--data-dir", "/d", "--secret-file", "/s"),
            *("--broker-session-timeout-ms", "3000", "--num-partitions", "3"),
        ],
        {},
    )
    assert (loaded.node_id, loaded.listeners, loaded.metadata_log_dir) == (2, "127.0.0.1:1", "/d")
    assert loaded.peers == (Peer(1, "127.0.0.1:3", "127.0.0.1:4"),)
    assert (loaded.broker_session_timeout_ms, loaded.num_partitions) == (3000, 3)
    assert load(BrokerConfig, "broker", [*_broker_flags(), "--listeners", "h:2"], {}).listeners == (
        "h:2"
    )


def _broker_flags() -> list[str]:
    return [
        *("--broker-id", "1", "--listen", "h:1", "--controllers", "c:1"),
        *("--data-dir", "/d", "--secret-file", "/s"),
    ]


# --- the keys themselves ---------------------------------------------------------------------


@pytest.mark.parametrize("config_class", list(SERVICE_CONFIGS.values()))
def test_every_field_has_a_key_and_every_key_a_distinct_flag(config_class: type) -> None:
    fields = dataclasses.fields(config_class)
    assert all("key" in f.metadata for f in fields)
    names = [k.name for k in config.keys_of(config_class)]
    assert len(names) == len(set(names))
    flags = [flag for k in config.keys_of(config_class) for flag in k.flags]
    assert len(flags) == len(set(flags))
    assert all(re.fullmatch(r"[a-z]+(\.[a-z]+)*", name) for name in names)


def test_the_defaults_copied_from_io_modules_still_match_them() -> None:
    # The config modules are pure, so they cannot import these driver modules' constants.
    from samsa.services.broker import broker_config, scrubber
    from samsa.services.controller import controller_config
    from samsa.services.controller.quorum import RaftTimings
    from samsa.services.coordinator import coordinator_config, transaction_partition

    assert broker_config.SCRUB_BYTES_PER_SECOND_DEFAULT == scrubber.SCRUB_BYTES_PER_SECOND_DEFAULT
    assert broker_config.SCRUB_INTERVAL_MS_DEFAULT == scrubber.SCRUB_INTERVAL_MS_DEFAULT
    assert RaftTimings.compaction_entries_min == controller_config.METADATA_SNAPSHOT_ENTRIES_DEFAULT
    assert (
        coordinator_config.ABORT_INTERVAL_MS_DEFAULT
        == transaction_partition.ABORT_INTERVAL_MS_DEFAULT
    )


def test_every_samsa_variable_in_the_repository_is_a_key_or_known_not_to_be_one() -> None:
    # A service refuses SAMSA_* variables it does not know; one added elsewhere (a test knob, a
    # client setting) must be listed in NOT_CONFIG_VARIABLES, or `samsa up` under it would fail.
    keys = {k.env_name for c in SERVICE_CONFIGS.values() for k in config.keys_of(c)}
    folders = ["common", "metadata", "services", "clients", "tests", "bench", "deploy"]
    found: set[str] = set()
    for folder in folders:
        for path in (REPO / folder).rglob("*"):
            if path.suffix in {".py", ".md", ".yml", ".yaml", ".env", ".properties"}:
                found |= set(re.findall(r"\bSAMSA_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    unlisted = {
        name
        for name in found - keys - config.NOT_CONFIG_VARIABLES
        if not name.startswith(config.NOT_CONFIG_PREFIXES)
    }
    assert unlisted <= {"SAMSA_BROKER_RAKC"}, unlisted  # the typo of a test above


def test_the_fetch_answer_budget_defaults_to_512_mib_and_holds_at_least_one_maximal_answer() -> (
    None
):
    assert broker().fetch_answers_bytes_max == 512 * 1024 * 1024
    floor = 2 * 64 * 1024 * 1024  # one maximal answer (limits.fetch_response_bytes_max), twice
    assert broker(file=f"fetch.answers.bytes.max={floor}\n").fetch_answers_bytes_max == floor
    with pytest.raises(
        ConfigError, match=rf"fetch.answers.bytes.max must be an integer >= {floor}"
    ):
        broker(file=f"fetch.answers.bytes.max={floor - 1}\n")


def test_the_fetch_answer_write_deadline_defaults_to_its_limit_and_may_only_be_lowered() -> None:
    assert broker().fetch_answer_write_timeout_ms == limits.fetch_answer_write_ms_max == 60_000
    assert broker(file="fetch.answer.write.timeout.ms=1000\n").fetch_answer_write_timeout_ms == 1000
    for refused in ("999", str(limits.fetch_answer_write_ms_max + 1)):
        with pytest.raises(
            ConfigError,
            match=r"fetch.answer.write.timeout.ms must be an integer from 1000 to 60000",
        ):
            broker(file=f"fetch.answer.write.timeout.ms={refused}\n")

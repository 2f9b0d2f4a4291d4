"""Goal: every client a `samsa` command builds connects as the user asked: with the TLS settings
of `--command-config FILE` when given, else those of the `samsa up --tls` cluster whose
cluster.json gave the address, else plaintext; a TLS key among --producer-property /
--consumer-property wins; a wrong setting is one line naming where it came from. No command
builds a client's configuration past `client_config`. `python -m samsa.cli.health` asks a TLS
service over TLS with --command-config.

Method: the real argparse tree of `samsa` and command_support's functions on tmp_path (a TLS
cluster's files made by the launcher, no process started); a source scan of the CLI modules; the
health check against an in-process grpc.health server serving TLS with client certificates
required.
"""

from __future__ import annotations

import argparse
import ast
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2_grpc

import samsa.cli
from samsa.cli import health as health_check
from samsa.cli.command_config import CommandConfigError, parse_command_config
from samsa.cli.command_support import client_config, client_settings, security
from samsa.cli.commands import add_commands
from samsa.cli.launcher import load_or_create
from samsa.common.tls import TlsSettings


def parse(*argv: str) -> argparse.Namespace:
    root = argparse.ArgumentParser(prog="samsa")
    add_commands(root.add_subparsers(dest="command", required=True))
    return root.parse_args(list(argv))


@pytest.fixture
def tls_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `samsa up --tls` data directory (its cluster.json and certificates)."""
    monkeypatch.delenv("SAMSA_BOOTSTRAP", raising=False)
    data_dir = tmp_path / "data"
    load_or_create(data_dir, 1, 1, tls=True)
    return data_dir


def test_a_properties_file_takes_comments_and_both_separators() -> None:
    text = "# made by hand\n\n! a Java comment\nsecurity.protocol = SSL\nssl.ca.location: /a=b\n"
    assert parse_command_config(text, "f") == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/a=b",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("security.protocol\n", "f line 1: 'security.protocol' is not KEY=VALUE"),
        ("# x\nacks=all\n", "f line 2: acks is not a connection setting; --command-config takes"),
        ("=SSL\n", "f line 1: '=SSL' is not KEY=VALUE"),
    ],
)
def test_a_line_that_is_not_a_connection_setting_is_named(text: str, message: str) -> None:
    with pytest.raises(CommandConfigError, match=message):
        parse_command_config(text, "f")


def test_the_cluster_json_of_a_tls_cluster_gives_its_client_settings(tls_cluster: Path) -> None:
    args = parse("topics", "list", "--data-dir", str(tls_cluster))
    expected = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls_cluster / "tls" / "ca.pem"),
        "ssl.certificate.location": str(tls_cluster / "tls" / "client.pem"),
        "ssl.key.location": str(tls_cluster / "tls" / "client-key.pem"),
    }
    assert security(args) == expected
    config = client_config(args)
    assert config.pop("bootstrap.servers").startswith("127.0.0.1:")
    assert config == expected


def test_an_address_from_elsewhere_does_not_take_the_clusters_settings(
    tls_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = parse("topics", "list", "--data-dir", str(tls_cluster), "--bootstrap-server", "h:1")
    assert client_config(flag) == {"bootstrap.servers": "h:1"}
    monkeypatch.setenv("SAMSA_BOOTSTRAP", "h:2")
    assert client_config(parse("topics", "list", "--data-dir", str(tls_cluster))) == {
        "bootstrap.servers": "h:2"
    }


def test_a_command_config_wins_over_the_cluster_json(tls_cluster: Path, tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    ca = tls_cluster / "tls" / "ca.pem"
    properties.write_text(f"security.protocol=SSL\nssl.ca.location={ca}\n")
    args = parse(
        "topics", "list", "--data-dir", str(tls_cluster), "--command-config", str(properties)
    )
    assert security(args) == {"security.protocol": "SSL", "ssl.ca.location": str(ca)}


def test_a_tls_key_among_the_client_properties_wins(tls_cluster: Path) -> None:
    other_ca = tls_cluster / "tls" / "broker-1.pem"
    args = parse(
        "produce",
        "t",
        "--data-dir",
        str(tls_cluster),
        "--producer-property",
        f"ssl.ca.location={other_ca}",
        "--producer-property",
        "acks=all",
    )
    assert security(args)["ssl.ca.location"] == str(other_ca)
    producer = client_settings(args, args.producer_property, "--producer-property")
    assert producer["acks"] == "all"
    assert producer["ssl.ca.location"] == str(other_ca)
    assert producer["security.protocol"] == "SSL"
    assert producer["bootstrap.servers"].startswith("127.0.0.1:")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            "ssl.ca.location=/nowhere/ca.pem\n",
            r"samsa: --command-config .* and --consumer-property: ssl\.ca\.location is set but "
            r"security\.protocol is PLAINTEXT",
        ),
        (
            "security.protocol=SSL\nssl.ca.location=/nowhere/ca.pem\n",
            r"samsa: --command-config .*: ssl\.ca\.location=/nowhere/ca\.pem: cannot read it",
        ),
        ("security.protocol=SASL_PLAINTEXT\n", r"Samsa sends SASL only over TLS"),
        ("security.protocol=SASL_SSL\n", r"SASL_SSL needs sasl\.mechanism"),
        ("sasl.username=alice\n", r"sasl\.username is set but security\.protocol is PLAINTEXT"),
    ],
)
def test_a_wrong_setting_is_one_line_naming_its_source(
    tmp_path: Path, lines: str, message: str
) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(lines)
    argv = ["consume", "t", "--bootstrap-server", "h:1", "--command-config", str(properties)]
    if "PLAINTEXT" in message:
        argv += ["--consumer-property", "security.protocol=PLAINTEXT"]
    with pytest.raises(SystemExit, match=message):
        security(parse(*argv))


def test_a_missing_command_config_is_one_line(tmp_path: Path) -> None:
    args = parse("cluster", "--bootstrap-server", "h:1", "--command-config", str(tmp_path / "no"))
    with pytest.raises(SystemExit, match=r"samsa: --command-config .*no: cannot read it"):
        client_config(args)


def test_no_command_builds_a_clients_configuration_by_hand() -> None:
    """A dict naming bootstrap.servers outside command_support is a client configured without
    the security settings: every Admin, Producer and Consumer goes through client_config."""
    package = Path(samsa.cli.__file__).parent
    by_hand = []
    for module in sorted(package.glob("*.py")):
        if module.name == "command_support.py":
            continue
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Dict) and any(
                isinstance(key, ast.Constant) and key.value == "bootstrap.servers"
                for key in node.keys
            ):
                by_hand.append(f"{module.name}:{node.lineno}")
    assert by_hand == []


def test_the_health_check_asks_a_tls_service_with_the_command_config(
    tls_cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tls = tls_cluster / "tls"
    served = TlsSettings.load(
        ca_location=str(tls / "ca.pem"),
        certificate_location=str(tls / "broker-1.pem"),
        key_location=str(tls / "broker-1-key.pem"),
        client_auth="required",
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_secure_port("127.0.0.1:0", served.server_credentials())
    server.start()
    properties = tmp_path / "client.properties"
    properties.write_text(
        "".join(
            f"{k}={v}\n"
            for k, v in security(parse("cluster", "--data-dir", str(tls_cluster))).items()
        )
    )
    address = f"127.0.0.1:{port}"
    try:
        assert health_check.main([address, "--command-config", str(properties)]) == 0
        assert health_check.main([address, "--timeout", "1"]) == 1
        assert capsys.readouterr().err == f"unhealthy: {address}: UNAVAILABLE\n"
        properties.write_text("ssl.ca.location=x\n")
        assert health_check.main([address, "--command-config", str(properties)]) == 2
        assert "security.protocol is PLAINTEXT" in capsys.readouterr().err
    finally:
        server.stop(None)

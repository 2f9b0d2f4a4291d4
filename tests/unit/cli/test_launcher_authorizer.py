"""Goal: `samsa up --tls --authorizer` makes a local cluster whose every process enforces ACLs with
the CLI's client certificate as its one super user; --authorizer without --tls is refused saying
why; cluster.json keeps the choice (an older file without it is a cluster without ACLs) and a
restart cannot silently flip it; tests can issue other principals' certificates from the
cluster's CA.

Method: the launcher on tmp_path, no process started; each command's flags read back through the
services' own config loading.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography import x509

from samsa.cli.cluster_spec import CLIENT_PRINCIPAL, ClusterSpec
from samsa.cli.cluster_tls import issue_client
from samsa.cli.launcher import LocalCluster, load_or_create
from samsa.cli.main import main
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.runtime.config_loading import load

CONFIGS = {"controller": ControllerConfig, "broker": BrokerConfig, "coordinator": CoordinatorConfig}


def test_every_process_enforces_acls_with_the_client_as_super_user(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 1, 2, coordinators=1, tls=True, authorizer=True)
    assert spec.authorizer
    assert json.loads((tmp_path / "cluster.json").read_text())["authorizer"] is True
    commands = LocalCluster(spec, tmp_path).commands()
    assert len(commands) == 4
    for name, command in commands.items():
        service = name.split("-")[0]
        flags = command[command.index("-m") + 2 :]
        config = load(CONFIGS[service], service, flags, {})
        assert config.authorizer_enabled, name
        assert config.super_users == frozenset({CLIENT_PRINCIPAL}), name


def test_without_the_flag_nothing_is_enforced(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 1, 1, tls=True)
    for command in LocalCluster(spec, tmp_path).commands().values():
        assert "--authorizer-class-name" not in command


def test_the_authorizer_needs_tls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="--authorizer needs --tls: ACLs name principals"):
        load_or_create(tmp_path, 1, 1, authorizer=True)
    with pytest.raises(SystemExit):
        main(["up", "--data-dir", str(tmp_path / "up"), "--authorizer"])
    assert "--authorizer needs --tls" in capsys.readouterr().err
    assert not (tmp_path / "up").exists()


def test_a_directory_keeps_its_choice(tmp_path: Path) -> None:
    load_or_create(tmp_path, 1, 1, tls=True, authorizer=True)
    with pytest.raises(ValueError, match="made with --authorizer; start it with --authorizer"):
        load_or_create(tmp_path, 1, 1, tls=True)


def test_an_older_cluster_json_has_no_authorizer(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 1, 1, tls=True)
    data = json.loads(spec.to_json())
    del data["authorizer"]
    assert ClusterSpec.from_json(json.dumps(data)).authorizer is False


def test_other_principals_certificates_come_from_the_clusters_ca(tmp_path: Path) -> None:
    load_or_create(tmp_path, 1, 1, tls=True, authorizer=True)
    security = issue_client(tmp_path, "alice")
    pem = Path(security["ssl.certificate.location"]).read_bytes()
    certificate = x509.load_pem_x509_certificate(pem)
    ca = x509.load_pem_x509_certificate((tmp_path / "tls" / "ca.pem").read_bytes())
    certificate.verify_directly_issued_by(ca)
    assert certificate.subject.rfc4514_string() == "CN=alice,O=samsa"
    assert issue_client(tmp_path, "alice") == security  # made once
    assert Path(security["ssl.certificate.location"]).read_bytes() == pem
    with pytest.raises(ValueError, match="taken"):
        issue_client(tmp_path, "client")

"""Goal: `samsa up --sasl` makes a cluster whose every process requires a SASL/SCRAM login over
TLS without client certificates; its first user, admin, gets a random password once, written to
two files only its owner may read (the password, and the controllers' bootstrap file naming it
for both mechanisms); the client settings log in as admin and are written (0600) for
--command-config but the password is never printed; with --authorizer admin is the super user;
a directory keeps its choice.

Method: `samsa` main() with the cluster's processes, health wait and watch replaced (no process
is started), and the launcher on tmp_path; each command's flags read back through the services'
own config loading.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from samsa.cli import up as up_module
from samsa.cli.cluster_spec import SASL_PRINCIPAL
from samsa.cli.command_config import read_command_config
from samsa.cli.launcher import LocalCluster, load_or_create
from samsa.cli.main import main as samsa_main
from samsa.client.client_tls import client_security
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.controller.scram_bootstrap import parse_bootstrap_credentials
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.runtime.config_loading import load

CONFIGS = {"controller": ControllerConfig, "broker": BrokerConfig, "coordinator": CoordinatorConfig}


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    def stop_at_once(cluster: LocalCluster) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalCluster, "start_all", lambda self: None)
    monkeypatch.setattr(LocalCluster, "stop_all", lambda self: None)
    monkeypatch.setattr(up_module, "wait_healthy", lambda cluster, timeout_s: None)
    monkeypatch.setattr(up_module, "_watch", stop_at_once)
    monkeypatch.setattr(up_module, "_stop_on_sigterm", lambda: None)


def private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600


def test_every_process_requires_a_login_and_admin_is_bootstrapped(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 1, 1, coordinators=1, sasl=True, authorizer=True)
    assert spec.tls and spec.sasl
    assert json.loads((tmp_path / "cluster.json").read_text())["sasl"] is True
    tls = tmp_path / "tls"
    password = (tls / "admin.password").read_text().strip()
    assert len(password) >= 24 and private(tls / "admin.password")
    assert private(tls / "scram-credentials")
    bootstrapped = parse_bootstrap_credentials((tls / "scram-credentials").read_text())
    assert {(c.mechanism.name, c.name, c.password) for c in bootstrapped} == {
        ("SCRAM-SHA-256", "admin", password),
        ("SCRAM-SHA-512", "admin", password),
    }
    for name, command in LocalCluster(spec, tmp_path).commands().items():
        service = name.split("-")[0]
        config = load(CONFIGS[service], service, command[command.index("-m") + 2 :], {})
        assert config.sasl_enabled_mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512"), name
        assert config.ssl_client_auth == "none", name  # clients log in instead
        assert config.super_users == frozenset({SASL_PRINCIPAL}), name
        if service == "controller":
            assert config.sasl_scram_bootstrap_credentials == str(tls / "scram-credentials")
    security = spec.client_security(tmp_path)
    assert security["security.protocol"] == "SASL_SSL"
    assert (security["sasl.username"], security["sasl.password"]) == ("admin", password)
    login = client_security(security)
    assert login is not None and login.login is not None  # the SDK takes them as they are
    # A restart keeps the password (clients configured from the first start still log in).
    load_or_create(tmp_path, 1, 1, coordinators=1, sasl=True, authorizer=True)
    assert (tls / "admin.password").read_text().strip() == password


def test_up_sasl_writes_the_settings_but_never_prints_the_password(
    tmp_path: Path, no_processes: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["up", "--data-dir", str(tmp_path), "--controllers", "1", "--brokers", "1", "--sasl"]
    assert samsa_main(argv) == 0
    out = capsys.readouterr().out
    tls = tmp_path.resolve() / "tls"
    password = (tls / "admin.password").read_text().strip()
    assert password not in out
    assert "                  sasl.password=(in the file above)\n" in out, out
    assert "                  sasl.username=admin\n" in out, out
    properties = tls / "client.properties"
    assert private(properties)
    assert read_command_config(properties)["sasl.password"] == password


def test_a_directory_keeps_its_sasl_choice(tmp_path: Path) -> None:
    load_or_create(tmp_path / "a", 1, 1, sasl=True)
    with pytest.raises(ValueError, match="made with --sasl; start it with --sasl as before"):
        load_or_create(tmp_path / "a", 1, 1, tls=True)
    load_or_create(tmp_path / "b", 1, 1, tls=True)
    with pytest.raises(ValueError, match="made without --sasl"):
        load_or_create(tmp_path / "b", 1, 1, sasl=True)

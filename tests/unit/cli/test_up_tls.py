"""Goal: `samsa up --tls` says how clients connect (the settings, and a properties file for
--command-config), and a data directory made with or without --tls is refused, in one line and
before any process starts, when started with the other choice.

Method: `samsa` main() with the cluster's processes, health wait and watch replaced (no process
is started; the launcher's TLS is test_launcher_tls.py's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.cli import up as up_module
from samsa.cli.command_config import read_command_config
from samsa.cli.launcher import LocalCluster
from samsa.cli.main import main as samsa_main


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    def stop_at_once(cluster: LocalCluster) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalCluster, "start_all", lambda self: None)
    monkeypatch.setattr(LocalCluster, "stop_all", lambda self: None)
    monkeypatch.setattr(up_module, "wait_healthy", lambda cluster, timeout_s: None)
    monkeypatch.setattr(up_module, "_watch", stop_at_once)
    monkeypatch.setattr(up_module, "_stop_on_sigterm", lambda: None)


def test_up_tls_prints_the_client_settings_and_writes_them(
    tmp_path: Path, no_processes: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["up", "--data-dir", str(tmp_path), "--controllers", "1", "--brokers", "1", "--tls"]
    assert samsa_main(argv) == 0
    out = capsys.readouterr().out
    tls = tmp_path.resolve() / "tls"
    expected = [
        "security.protocol=SSL",
        f"ssl.ca.location={tls / 'ca.pem'}",
        f"ssl.certificate.location={tls / 'client.pem'}",
        f"ssl.key.location={tls / 'client-key.pem'}",
    ]
    assert f"tls             clients connect with ({tls / 'client.properties'}):" in out
    assert all(f"                  {line}\n" in out for line in expected), out
    written = (tls / "client.properties").read_text().splitlines()
    assert written[0].startswith("#") and written[1:] == expected
    assert read_command_config(tls / "client.properties") == dict(
        line.split("=", 1) for line in expected
    )  # what --command-config reads
    # a restart with --tls reuses the directory
    assert samsa_main(argv) == 0


def test_up_without_tls_prints_no_client_settings(
    tmp_path: Path, no_processes: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["up", "--data-dir", str(tmp_path), "--controllers", "1", "--brokers", "1"]
    assert samsa_main(argv) == 0
    assert "tls " not in capsys.readouterr().out
    assert not (tmp_path / "tls").exists()


@pytest.mark.parametrize(
    ("first", "then", "message"),
    [
        ([], ["--tls"], "made without --tls; start it without --tls as before"),
        (["--tls"], [], "made with --tls; start it with --tls as before"),
    ],
)
def test_a_directory_is_not_restarted_with_the_other_tls_choice(
    tmp_path: Path,
    no_processes: None,
    capsys: pytest.CaptureFixture[str],
    first: list[str],
    then: list[str],
    message: str,
) -> None:
    argv = ["up", "--data-dir", str(tmp_path), "--controllers", "1", "--brokers", "1"]
    assert samsa_main([*argv, *first]) == 0
    capsys.readouterr()
    assert samsa_main([*argv, *then]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("samsa up: ") and message in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert "starting" not in captured.out

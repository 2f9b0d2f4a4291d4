"""Goal: a service whose gRPC listen address cannot be bound (another process holds the port)
stops at start as for any other bad setting: one line `samsa <kind>: cannot listen on ...` and
exit code 2, no traceback (services/runtime/service_process.py); so does a controller whose Raft
address is taken, which ran for ever without a word, outside the quorum (pysyncobj retries a
failed bind every second, in silence).

Method: a socket of this test holds a loopback port; each service is started on that port in a
subprocess (bounded by a timeout, so it is gone when the test ends) and its exit is checked.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def busy_port() -> Iterator[int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def secret_file(directory: Path) -> Path:
    path = directory / "secret"
    path.write_text(secrets.token_urlsafe(32) + "\n")
    path.chmod(0o600)
    return path


def flags(service: str, port: int, directory: Path) -> list[str]:
    common = ["--listen", f"127.0.0.1:{port}", "--secret-file", str(secret_file(directory))]
    if service == "broker":
        return [*common, "--broker-id", "1", "--controllers", "127.0.0.1:1", "--data-dir",
                str(directory / "data")]  # fmt: skip
    return [*common, "--coordinator-id", "1", "--controllers", "127.0.0.1:1"]


@pytest.mark.parametrize("service", ["broker", "coordinator"])
def test_a_listen_address_in_use_stops_the_service_with_one_line(
    service: str, busy_port: int, tmp_path: Path
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"samsa.services.{service}", *flags(service, busy_port, tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"samsa {service}: cannot listen on 127.0.0.1:{busy_port}"), last


def test_a_raft_address_in_use_stops_the_controller_with_one_line(
    busy_port: int, tmp_path: Path
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "samsa.services.controller", "--node-id", "1",
         "--listen", "127.0.0.1:0", "--raft-address", f"127.0.0.1:{busy_port}", "--peers", "",
         "--data-dir", str(tmp_path / "data"), "--secret-file", str(secret_file(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,  # it used to run until here: the test fails, the controller is killed
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"samsa controller: cannot listen on 127.0.0.1:{busy_port}"), last
    assert "set raft.address to a free host:port" in last

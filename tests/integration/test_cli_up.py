"""`samsa up`, the README run command: healthy cluster, clean stop, restart on the same data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)


def run_up_until_healthy(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "samsa.cli.main",
            "up",
            "--data-dir",
            str(data_dir),
            "--controllers",
            "3",
            "--brokers",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    deadline = time.monotonic() + 120
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("bootstrap"):
            return process, line.split()[1]
    process.kill()
    raise AssertionError("samsa up never became healthy:\n" + "".join(lines))


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    return output


def service_pids(data_dir: Path) -> list[int]:
    """Processes still running a service of this data dir (there must be none after a stop)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "samsa.services" in command and str(data_dir) in command:
                pids.append(int(entry.name))
    return pids


def test_up_runs_a_cluster_stops_it_cleanly_and_restarts_it_on_the_same_data(tmp_path: Path):
    data_dir = tmp_path / "cluster"
    process, bootstrap = run_up_until_healthy(data_dir)
    try:
        spec = json.loads((data_dir / "cluster.json").read_text())
        assert len(spec["controllers"]) == 3 and len(spec["brokers"]) == 2
        assert len(spec["coordinators"]) == 2, "coordinators start by default (and were healthy)"
        assert bootstrap == ",".join(f"127.0.0.1:{c['grpc_port']}" for c in spec["controllers"])
        assert os.stat(data_dir / "cluster.secret").st_mode & 0o077 == 0
    finally:
        output = stop(process)
    assert "stopped" in output
    assert service_pids(data_dir) == [], "samsa up left service processes running"

    process, again = run_up_until_healthy(data_dir)
    try:
        assert again == bootstrap, "a second `samsa up` must restart the same cluster"
    finally:
        stop(process)
    assert service_pids(data_dir) == []


def test_a_second_ctrl_c_while_stopping_leaves_no_process_running(tmp_path: Path) -> None:
    """An impatient second Ctrl-C (or SIGTERM) during the graceful stop kills what is left at
    once: it used to break off the stop and leave controllers and brokers running, orphaned,
    holding their data directories."""
    data_dir = tmp_path / "cluster"
    process, _ = run_up_until_healthy(data_dir)
    try:
        running = len(service_pids(data_dir))
        process.send_signal(signal.SIGINT)
        while len(service_pids(data_dir)) == running:  # the stop has begun: the coordinators
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
        assert service_pids(data_dir) == [], "samsa up left service processes running:\n" + output
        assert "Traceback" not in output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in service_pids(data_dir):
            os.kill(pid, signal.SIGKILL)


def test_a_closed_terminal_stops_the_cluster(tmp_path: Path) -> None:
    """SIGHUP (the terminal running `samsa up` closed) stops every process as Ctrl-C does: the
    services run in sessions of their own, so the hangup reaches `samsa up` alone, which used
    to die of it and leave them all running, orphaned."""
    data_dir = tmp_path / "cluster"
    process, _ = run_up_until_healthy(data_dir)
    try:
        process.send_signal(signal.SIGHUP)
        output, _ = process.communicate(timeout=60)
        assert service_pids(data_dir) == [], "samsa up left service processes running:\n" + output
        assert process.returncode == 0, output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in service_pids(data_dir):
            os.kill(pid, signal.SIGKILL)

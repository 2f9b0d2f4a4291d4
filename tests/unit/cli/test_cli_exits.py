"""Goal: `samsa` ends as a Unix command line tool does, never with a Python traceback: output
piped into a reader that stops early (`samsa consume ... | head`) ends it quietly with 141 (as a
command killed by SIGPIPE), Ctrl-C with 130, SIGTERM with 143 and SIGHUP (its terminal closed)
with 129 (as a command those signals killed), after closing its clients as Ctrl-C does.

Method: `python -m samsa.cli.main` in a subprocess with no cluster behind it: `samsa trace` over a
span file large enough that its output cannot all fit in a pipe whose reader is gone, and a
cluster command whose bootstrap address accepts connections but never answers, interrupted once
the command is connected (so the signal falls in the command, not in Python's start-up).
A cluster.json that is not one `samsa up` wrote is one line too (`bootstrap` on it).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from samsa.cli.command_support import bootstrap

pytestmark = pytest.mark.timeout(60)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    lines = (
        json.dumps(
            {
                "trace_id": TRACE_ID,
                "span_id": f"{n:016x}",
                "parent_span_id": None,
                "name": f"produce orders {n}",
                "service": "samsa-broker-1",
                "start_ns": n,
                "end_ns": n + 1_000_000,
            }
        )
        for n in range(1, 5001)
    )
    spans.write_text("\n".join(lines) + "\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli.main", "trace", TRACE_ID, "--file", str(spans)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line is written
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=30) == 141, stderr
    assert stderr == ""


def interrupted(stop: signal.Signals, nohup: bool = False) -> tuple[int, str]:
    """Exit code and stderr of a cluster command sent `stop` once it connected to an address
    that never answers (it gives up after 3 s otherwise); `nohup`: started by nohup(1), which
    ignores SIGHUP and then runs the command in its own process."""
    with socket.socket() as silent:  # accepts a connection, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        silent.settimeout(20)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        command = ["topics", "list", "--bootstrap-server", address]
        process = subprocess.Popen(
            ["nohup"] * nohup + [sys.executable, "-m", "samsa.cli.main", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            connection, _ = silent.accept()  # the command is running: it connected
            with connection:
                process.send_signal(stop)
                _, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return process.returncode, stderr.decode()


@pytest.mark.parametrize(
    ("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_ctrl_c_sigterm_or_sighup_ends_a_cluster_command_quietly(
    stop: signal.Signals, code: int
) -> None:
    returncode, stderr = interrupted(stop)
    assert returncode == code, stderr
    assert "Traceback" not in stderr


def test_under_nohup_a_sighup_stays_ignored() -> None:
    returncode, stderr = interrupted(signal.SIGHUP, nohup=True)
    assert returncode == 1, stderr  # went on, and found no cluster there
    assert "cannot reach the cluster" in stderr


@pytest.mark.parametrize("content", ["{bad", "[]", '{"controllers": [{"port": 1}]}'])
def test_an_unreadable_cluster_json_is_one_line(
    content: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAMSA_BOOTSTRAP", raising=False)
    (tmp_path / "cluster.json").write_text(content)
    args = argparse.Namespace(bootstrap_server=None, data_dir=str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        bootstrap(args)
    assert str(exited.value) == (
        f"samsa: {tmp_path / 'cluster.json'} is not a cluster `samsa up` wrote; pass "
        "--bootstrap-server or set SAMSA_BOOTSTRAP"
    )

"""Goal: one process per data directory. Two brokers on one `log.dirs` (or two controllers on one
metadata directory) would append to the same files from two processes and corrupt them with
nothing to say so; Kafka refuses the second with its `.lock`. So does Samsa: the second is
refused before it binds a port or opens a file, naming the first, and the lock goes with its
holder's exit (after a SIGKILL too), so a restart is never refused by a dead process.

Method: the lock taken here and in child processes (a real `flock` between real processes); each
service's `main` run as a subprocess on a directory this test holds; `samsa up` (in this
process, with starting a cluster made an error) on a directory another process holds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from samsa.cli import up as up_command
from samsa.services.runtime.data_dir_lock import (
    LOCK_FILE,
    DataDirError,
    DataDirInUseError,
    lock_data_dir,
)

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from samsa.services.runtime.data_dir_lock import lock_data_dir
    lock_data_dir(Path(sys.argv[1]), "broker 7")
    print("locked", flush=True)
    time.sleep(120)
    """
)


def holder(directory: Path) -> subprocess.Popen[str]:
    """A child process that locks `directory` as "broker 7" and sleeps; started once locked."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    return child


def test_a_second_lock_is_refused_and_names_the_holder(tmp_path: Path) -> None:
    directory = tmp_path / "broker-1"
    with lock_data_dir(directory, "broker 1"):
        assert (directory / LOCK_FILE).read_text() == f"broker 1 (pid {os.getpid()})\n"
        with pytest.raises(DataDirInUseError) as refused:
            lock_data_dir(directory, "broker 2")
        assert f"data directory {directory} is in use by broker 1 (pid {os.getpid()})" in str(
            refused.value
        )
    with lock_data_dir(directory, "broker 2"):  # released: the next one may take it
        assert (directory / LOCK_FILE).read_text().startswith("broker 2 (pid ")


def test_another_process_holding_it_is_refused_until_it_dies_even_by_sigkill(
    tmp_path: Path,
) -> None:
    child = holder(tmp_path)
    try:
        with pytest.raises(DataDirInUseError, match=rf"broker 7 \(pid {child.pid}\)"):
            lock_data_dir(tmp_path, "broker 8")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    with lock_data_dir(tmp_path, "broker 8"):
        pass


@pytest.mark.parametrize(
    ("service", "flags"),
    [
        ("broker", ["--broker-id", "1", "--controllers", "127.0.0.1:1"]),
        (
            "controller",
            ["--node-id", "1", "--raft-address", "127.0.0.1:1"],
        ),
    ],
)
def test_a_service_on_a_held_directory_stops_at_once_saying_whose_it_is(
    tmp_path: Path, service: str, flags: list[str]
) -> None:
    directory = tmp_path / "data"
    with lock_data_dir(directory, "broker 7"):
        (directory / "keep").write_bytes(b"stored")
        exited = subprocess.run(
            [
                *(sys.executable, "-m", f"samsa.services.{service}", *flags),
                *("--listen", "127.0.0.1:0", "--data-dir", str(directory)),
                *("--secret-file", str(tmp_path / "no-such-secret")),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert exited.returncode == 2, exited.stderr
    assert f"samsa {service}: data directory {directory} is in use by broker 7" in exited.stderr
    assert sorted(p.name for p in directory.iterdir()) == [LOCK_FILE, "keep"]
    assert (directory / "keep").read_bytes() == b"stored"


def test_a_second_samsa_up_on_one_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_cluster(*args: object) -> None:
        raise AssertionError("samsa up started a cluster on a directory another process holds")

    monkeypatch.setattr(up_command, "LocalCluster", no_cluster)
    child = holder(tmp_path)
    try:
        code = up_command.up(tmp_path, controllers=1, brokers=1, coordinators=0)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert code == 2
    assert f"samsa up: data directory {tmp_path} is in use by broker 7" in capsys.readouterr().err
    assert not (tmp_path / "cluster.json").exists()  # refused before it wrote anything


@pytest.mark.parametrize("under", ["", "sub"])
def test_a_data_directory_that_cannot_be_one_is_refused_saying_why(
    tmp_path: Path, under: str
) -> None:
    # A regular file where the directory should be (or above it): FileExistsError or
    # NotADirectoryError came out of mkdir, and the service ended in a traceback, exit 1.
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"")
    directory = a_file / under if under else a_file
    with pytest.raises(DataDirError, match=rf"^cannot use {directory} as a data directory"):
        lock_data_dir(directory, "broker 1")
    exited = subprocess.run(
        [
            *(sys.executable, "-m", "samsa.services.broker", "--broker-id", "1"),
            *("--controllers", "127.0.0.1:1", "--listen", "127.0.0.1:0"),
            *("--data-dir", str(directory), "--secret-file", str(tmp_path / "no-such-secret")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert exited.returncode == 2, exited.stderr
    assert "Traceback" not in exited.stderr, exited.stderr
    assert f"samsa broker: cannot use {directory} as a data directory" in exited.stderr


def test_samsa_up_on_a_data_directory_that_cannot_be_one_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"")
    code = up_command.up(a_file / "data", controllers=1, brokers=1, coordinators=0)
    assert code == 2
    assert f"samsa up: cannot use {a_file / 'data'} as a data directory" in capsys.readouterr().err

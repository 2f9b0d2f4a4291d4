"""Goal: `samsa metadata-quorum describe` prints what Kafka's kafka-metadata-quorum.sh prints:
--status as Kafka's `Key: value` lines (with MetadataOffset, the observers' unit, beside the
high watermark), --replication as Kafka's table with the leader first, then the followers, then
the observers, each with its role, times raw or (--human-readable) as how long before the
leader's answer; -1 for a time the leader does not know. --status and --replication are one of
them, required; --human-readable without --replication is a usage error (exit 2, nothing asked).

Method: cli/quorum_commands.run_quorum with Admin replaced by a stand-in (no cluster), and
samsa's main() for the usage errors; the command on a real cluster is
tests/integration/test_metadata_quorum.py.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from samsa.cli import quorum_commands
from samsa.cli.commands import add_commands
from samsa.cli.main import main as samsa_main
from samsa.client.metadata_quorum import QuorumInfo, ReplicaState

NOBODY = ["--bootstrap-server", "127.0.0.1:1"]

INFO = QuorumInfo(
    cluster_id="c1",
    leader_id=2,
    leader_epoch=4,
    high_watermark=40,
    metadata_offset=90,
    voters=(
        ReplicaState(2, "controller", 41, 0, 5000, 5000, True),
        ReplicaState(1, "controller", 41, 0, 4990, 4950, True),
        ReplicaState(3, "controller", 30, 11, None, 2000, False),
    ),
    observers=(
        ReplicaState(1, "broker", 88, 2, 4800, 4000),
        ReplicaState(1, "coordinator", -1, -1, None, None),
    ),
)


class StandInAdmin:
    def __init__(self, config: Any) -> None:
        self.config = config

    def __enter__(self) -> StandInAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def describe_metadata_quorum(self) -> QuorumInfo:
        return INFO


def run(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    monkeypatch.setattr(quorum_commands, "Admin", StandInAdmin)
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["metadata-quorum", "describe", *argv])
    return quorum_commands.run_quorum(args, "127.0.0.1:1")


def test_status_is_kafkas_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, "--status") == 0
    lines = [line.split(":", 1) for line in capsys.readouterr().out.splitlines()]
    assert [(key, value.strip()) for key, value in lines] == [
        ("ClusterId", "c1"),
        ("LeaderId", "2"),
        ("LeaderEpoch", "4"),
        ("HighWatermark", "40"),
        ("MetadataOffset", "90"),
        ("MaxFollowerLag", "11"),
        ("MaxFollowerLagTimeMs", "3000"),
        ("CurrentVoters", "[2,1,3]"),
        ("CurrentObservers", "[1,coordinator-1]"),
    ]


def test_replication_is_kafkas_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, "--replication") == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert rows[1:] == [
        ["2", "41", "0", "5000", "5000", "Leader"],
        ["1", "41", "0", "4990", "4950", "Follower"],
        ["3", "30", "11", "-1", "2000", "Follower", "(not", "connected)"],
        ["1", "88", "2", "4800", "4000", "Observer"],
        ["coordinator-1", "-1", "-1", "-1", "-1", "Observer"],
    ]


def test_human_readable_times_are_how_long_before_the_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, "--replication", "--human-readable") == 0
    out = capsys.readouterr().out
    assert "10 ms ago" in out and "50 ms ago" in out and "3000 ms ago" in out


@pytest.mark.parametrize(
    "argv", [["--status", "--replication"], [], ["--status", "--human-readable"]]
)
def test_usage_errors_exit_2_before_connecting(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = samsa_main(["metadata-quorum", "describe", *argv, *NOBODY])
    except SystemExit as stop:  # argparse's own
        code = int(stop.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    if "--human-readable" in argv:
        assert err == "samsa metadata-quorum: --human-readable goes with --replication\n"

"""Goal: `samsa topics create NAME --replica-assignment 1:2,2:3` reads Kafka's notation (partitions
by commas, replicas by colons, the first the preferred leader) into partition -> replicas and
sends it as NewTopic's replica_assignments; a malformed list is a usage error naming the
partition, and --partitions or --replication-factor beside it is refused (exit 2), as Kafka's
kafka-topics.sh refuses the mix. `samsa topics alter --partitions N --replica-assignment ...`
lists every partition, as Kafka's --alter does, and sends the added partitions' lists only.

Method: the pure argparse type `replica_assignment`, the real argparse tree of `samsa` with
`topics_usage_error`, and `run` and `alter_topic` over stand-in Admins (no cluster); the
command against a real cluster is in tests/integration/test_topic_replica_assignment.py.
"""

from __future__ import annotations

import argparse
import re
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from samsa.cli import commands
from samsa.cli.command_support import replica_assignment
from samsa.cli.commands import add_commands, topics_usage_error
from samsa.cli.topic_changes import added_assignments, alter_topic


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["topics", "create", "t", *argv])


@pytest.mark.parametrize(
    ("text", "plan"),
    [
        ("1:2,2:3,3:1", {0: [1, 2], 1: [2, 3], 2: [3, 1]}),
        ("3", {0: [3]}),
        (" 1 : 2 , 2:3", {0: [1, 2], 1: [2, 3]}),
        ("2:1:3", {0: [2, 1, 3]}),
    ],
)
def test_kafkas_notation_is_read_partition_by_partition_in_order(
    text: str, plan: dict[int, list[int]]
) -> None:
    assert replica_assignment(text) == plan


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "partition 0"),
        ("1:2,", "partition 1"),
        ("1::2", "empty broker id"),
        ("1:x", "'x' is not an integer"),
        ("1:2:1", "partition 0 (1:2:1) names a broker more than once"),
        ("1,2:2", "partition 1 (2:2) names a broker more than once"),
        ("1:4294967296", "does not fit a broker id"),
    ],
)
def test_a_malformed_list_is_refused_naming_the_partition(text: str, words: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(words)):
        replica_assignment(text)


def test_a_malformed_list_is_a_usage_error_of_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("--replica-assignment", "1:1")
    assert exited.value.code == 2
    assert "--replica-assignment" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--partitions", "2"], "--partitions cannot"),
        (["--replication-factor", "-1"], "--replication-factor cannot"),
        (["--partitions", "2", "--replication-factor", "2"], "--partitions and --replication"),
    ],
)
def test_a_count_or_factor_beside_the_assignment_is_refused(flags: list[str], named: str) -> None:
    problem = topics_usage_error(parse("--replica-assignment", "1:2", *flags))
    assert problem is not None and named in problem


def test_without_the_assignment_count_and_factor_stay_as_they_were() -> None:
    assert topics_usage_error(parse("--partitions", "2", "--replication-factor", "2")) is None
    assert topics_usage_error(parse("--replica-assignment", "1:2,2:1")) is None


class StandInAdmin:
    """Records what create_topics was given; describes the topic with one partition per list."""

    created: ClassVar[list[Any]] = []

    def __init__(self, config: dict[str, str]) -> None:
        pass

    def __enter__(self) -> StandInAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def create_topics(self, topics: list[Any]) -> None:
        StandInAdmin.created = list(topics)

    def describe_topics(self, names: list[str]) -> dict[str, SimpleNamespace]:
        (topic,) = StandInAdmin.created
        count = len(topic.replica_assignments or {0: []})
        return {name: SimpleNamespace(partitions=[0] * count) for name in names}


def test_the_command_sends_the_plan_as_new_topic_replica_assignments(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(commands, "Admin", StandInAdmin)
    monkeypatch.setattr(commands, "_check_reachable", lambda servers, settings: None)
    args = parse("--replica-assignment", "1:2,2:3,3:1", "--bootstrap-server", "h:1")
    assert commands.run(args) == 0
    (topic,) = StandInAdmin.created
    assert topic.replica_assignments == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert (topic.num_partitions, topic.replication_factor) == (-1, -1)
    assert capsys.readouterr().out == "created t with 3 partition(s)\n"


def test_the_command_refuses_the_mix_with_exit_2_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unreachable(servers: str, settings: dict[str, str]) -> None:
        raise AssertionError("connected")

    monkeypatch.setattr(commands, "_check_reachable", unreachable)
    args = parse("--replica-assignment", "1:2", "--partitions", "1", "--bootstrap-server", "h:1")
    assert commands.run(args) == 2
    assert "samsa topics create: --partitions cannot be used" in capsys.readouterr().err


class GrowingAdmin:
    """A topic "t" of 2 partitions; records what create_partitions was given."""

    def __init__(self) -> None:
        self.grown: list[tuple[dict[str, int], object]] = []

    def describe_topics(self, names: list[str]) -> dict[str, SimpleNamespace]:
        return {name: SimpleNamespace(partitions=[0, 1]) for name in names}

    def create_partitions(self, counts: dict[str, int], replica_assignments: object) -> None:
        self.grown.append((counts, replica_assignments))


def alter_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["topics", "alter", "t", *argv])


def test_alter_sends_the_lists_of_the_added_partitions_only() -> None:
    """Kafka's kafka-topics --alter lists every partition and skips the existing ones."""
    admin = GrowingAdmin()
    args = alter_args("--partitions", "4", "--replica-assignment", "1:2,2:3,3:1,1:3")
    assert alter_topic(admin, args) == 0  # type: ignore[arg-type]
    assert admin.grown == [({"t": 4}, {"t": [[3, 1], [1, 3]]})]
    assert added_assignments(None, 2) is None


def test_alter_refuses_an_assignment_without_a_count_or_without_new_partitions() -> None:
    admin = GrowingAdmin()
    with pytest.raises(SystemExit, match="give the new count with --partitions N"):
        alter_topic(admin, alter_args("--replica-assignment", "1:2,2:3,3:1"))  # type: ignore[arg-type]
    args = alter_args("--partitions", "3", "--replica-assignment", "1:2,2:3")
    with pytest.raises(SystemExit, match=r"lists 2 partition\(s\), but the topic has 2 already"):
        alter_topic(admin, args)  # type: ignore[arg-type]
    assert admin.grown == [], "nothing sent"

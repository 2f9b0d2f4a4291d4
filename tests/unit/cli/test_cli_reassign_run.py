"""Goal: `samsa reassign` says what Kafka's kafka-reassign-partitions.sh says, in the CLI's style:
--execute prints the current assignment to roll back to before it starts anything, refuses while
other reassignments run unless --additional, and names each partition refused (exit 1) beside
those started; --verify exits 1 while any is still moving; --cancel says which had nothing to
cancel without calling that an error; --list and `topics describe` show the replicas being added
and removed, and `cluster` counts a partition whose only replicas out of the ISR are those being
added as reassigning, not under-replicated; --generate prints both plans and refuses a broker
that is not registered. Usage and file errors end the command before it connects (exit 2, exit
1).

Method: cli/reassign_commands.reassign over a stand-in Admin (no cluster), and commands.run for
the usage errors; the command against a real cluster is tests/integration/test_cli_reassign.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from samsa.cli.commands import add_commands, partition_status, partitions_table, run
from samsa.cli.reassign_commands import prepare_reassign, reassign
from samsa.client import TopicError
from samsa.client.admin import PartitionReassignment
from samsa.client.cluster_admin import PartitionInfo
from samsa.client.errors import first_of
from samsa.common.errors import ErrorCode


class StandInAdmin:
    """Topic t has partitions 0-2 on broker 1; `moving` lists reassignments in progress."""

    def __init__(self) -> None:
        self.partitions = {p: PartitionInfo(p, 1, 0, (1,), (1,)) for p in range(3)}
        self.moving: dict[tuple[str, int], PartitionReassignment] = {}
        self.altered: list[dict[Any, Any]] = []
        self.refuse: dict[tuple[str, int], ErrorCode] = {}
        self.configs_altered: list[tuple[Any, dict[str, str], tuple[str, ...]]] = []

    def describe_topics(self, names: Any = None) -> dict[str, Any]:
        names = list(names)
        for name in names:
            if name != "t":
                raise TopicError(
                    f"topic {name!r} does not exist", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
        return {"t": SimpleNamespace(partitions=tuple(self.partitions.values()))}

    def describe_cluster(self) -> Any:
        return SimpleNamespace(brokers=[SimpleNamespace(broker_id=b) for b in (1, 2, 3)])

    def alter_configs(self, target: Any, set: Any = None, delete: Any = ()) -> None:
        """Recorded: (resource, set, deleted) (the throttles, test_cli_reassign_throttle.py)."""
        self.configs_altered.append((target, dict(set or {}), tuple(delete)))

    def list_partition_reassignments(self, partitions: Any = None) -> dict[Any, Any]:
        return dict(self.moving)

    def alter_partition_reassignments(self, wanted: dict[Any, Any]) -> None:
        self.altered.append(dict(wanted))
        errors = {
            key: TopicError(f"partition {key[0]}-{key[1]}: {code.name.lower()}", code)
            for key, code in self.refuse.items()
            if key in wanted
        }
        if error := first_of(errors):  # type: ignore[arg-type]
            raise error


def parsed(tmp_path: Path, *argv: str, plan: object = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    if plan is not None:
        (tmp_path / "plan.json").write_text(json.dumps(plan))
        argv = (*argv, "--reassignment-json-file", str(tmp_path / "plan.json"))
    args = parser.parse_args(["reassign", *argv])
    assert prepare_reassign(args) is None
    return args


def plan(*moves: tuple[int, list[int]]) -> dict[str, Any]:
    return {
        "version": 1,
        "partitions": [{"topic": "t", "partition": p, "replicas": r} for p, r in moves],
    }


def test_execute_prints_the_rollback_plan_then_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    args = parsed(tmp_path, "--execute", plan=plan((1, [2, 3]), (0, [3])))
    assert reassign(admin, args) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
        '{"topic":"t","partition":1,"replicas":[1]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignments for t-1,t-0\n"
    )
    assert err == "" and admin.altered == [{("t", 1): (2, 3), ("t", 0): (3,)}]


def test_execute_names_each_refused_partition_beside_those_started(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    admin.refuse = {("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    args = parsed(tmp_path, "--execute", plan=plan((0, [2]), (1, [9])))
    assert reassign(admin, args) == 1  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out.endswith("Successfully started partition reassignments for t-0\n")
    assert err == (
        "samsa reassign: partition t-1: invalid_replica_assignment (INVALID_REPLICA_ASSIGNMENT)\n"
    )


def test_execute_refuses_while_others_move_unless_additional(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    admin.moving = {("u", 4): PartitionReassignment((1, 2), (2,), (1,))}
    with pytest.raises(SystemExit, match=r"1 partition\(s\) are being reassigned already \(u-4\)"):
        reassign(admin, parsed(tmp_path, "--execute", plan=plan((0, [2]))))  # type: ignore[arg-type]
    assert admin.altered == [] and capsys.readouterr().out == "", "nothing printed nor started"
    args = parsed(tmp_path, "--execute", "--additional", plan=plan((0, [2])))
    assert reassign(admin, args) == 0  # type: ignore[arg-type]
    assert admin.altered == [{("t", 0): (2,)}]


def test_a_partition_or_topic_that_does_not_exist_is_named(tmp_path: Path) -> None:
    admin = StandInAdmin()
    with pytest.raises(SystemExit, match=r"topic 't' has no partition 7 \(it has 3: 0 to 2\)"):
        reassign(admin, parsed(tmp_path, "--verify", plan=plan((7, [2]))))  # type: ignore[arg-type]
    gone = {"partitions": [{"topic": "gone", "partition": 0, "replicas": [1]}]}
    with pytest.raises(TopicError, match="'gone' does not exist"):
        reassign(admin, parsed(tmp_path, "--execute", plan=gone))  # type: ignore[arg-type]
    assert admin.altered == []


def test_verify_exits_1_while_any_is_still_moving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    admin.partitions[0] = PartitionInfo(0, 1, 1, (2, 1), (1,), (2,), (1,))
    args = parsed(tmp_path, "--verify", plan=plan((0, [2]), (1, [1])))
    assert reassign(admin, args) == 1  # type: ignore[arg-type]
    assert capsys.readouterr().out == (
        "Status of partition reassignment:\n"
        "Reassignment of partition t-0 is still in progress.\n"
        "Reassignment of partition t-1 is complete.\n"
    )
    admin.partitions[0] = PartitionInfo(0, 2, 2, (2,), (2,))
    assert reassign(admin, args) == 0  # type: ignore[arg-type]


def test_cancel_says_which_had_nothing_to_cancel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    admin.refuse = {("t", 1): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    args = parsed(tmp_path, "--cancel", plan=plan((0, [2]), (1, [2])))
    assert reassign(admin, args) == 0  # type: ignore[arg-type]
    assert admin.altered == [{("t", 0): None, ("t", 1): None}]
    out, err = capsys.readouterr()
    assert out == (
        "Successfully cancelled partition reassignments for: t-0\n"
        "No reassignment of partition t-1 is in progress.\n"
    )
    assert err == ""
    admin.refuse = {("t", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert reassign(admin, args) == 1  # type: ignore[arg-type]
    assert "(UNKNOWN_TOPIC_OR_PARTITION)" in capsys.readouterr().err


def test_list_shows_the_replicas_being_added_and_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    assert reassign(admin, parsed(tmp_path, "--list")) == 0  # type: ignore[arg-type]
    assert capsys.readouterr().out == "no reassignments in progress\n"
    admin.moving = {
        ("t", 2): PartitionReassignment((2, 3, 1), (2, 3), (1,)),
        ("t", 0): PartitionReassignment((1, 2), (), (2,)),
    }
    assert reassign(admin, parsed(tmp_path, "--list")) == 0  # type: ignore[arg-type]
    assert capsys.readouterr().out.splitlines() == [
        "topic  partition  replicas  adding  removing",
        "t      0          1,2       -       2",
        "t      2          2,3,1     2,3     1",
    ]


def test_topics_describe_shows_adding_and_removing_only_while_moving() -> None:
    still = [PartitionInfo(0, 1, 0, (1,), (1,))]
    assert partitions_table(still).splitlines()[0].split() == [
        "partition", "leader", "epoch", "replicas", "isr"
    ]  # fmt: skip
    moving = [*still, PartitionInfo(1, 1, 0, (2, 1), (1,), (2,), (1,))]
    assert partitions_table(moving).splitlines() == [
        "partition  leader  epoch  replicas  isr  adding  removing",
        "0          1       0      1         1    -       -",
        "1          1       0      2,1       1    2       1",
    ]


def test_generate_prints_both_plans_and_refuses_an_unregistered_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "move.json").write_text('{"version":1,"topics":[{"topic":"t"}]}')
    flags = ("--generate", "--topics-to-move-json-file", str(tmp_path / "move.json"))
    admin = StandInAdmin()
    assert reassign(admin, parsed(tmp_path, *flags, "--broker-list", "2,3")) == 0  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1])["partitions"][0] == {"topic": "t", "partition": 0, "replicas": [1]}
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = [p["replicas"] for p in json.loads(lines[4])["partitions"]]
    assert proposed == [[2], [3], [2]] and admin.altered == [], "generate writes nothing"
    with pytest.raises(
        SystemExit, match=r"broker\(s\) 7 that are not registered \(registered: 1,2,3\)"
    ):
        reassign(admin, parsed(tmp_path, *flags, "--broker-list", "2,7"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--execute"], "--execute needs --reassignment-json-file FILE"),
        (["--generate", "--broker-list", "1"], "--generate needs --topics-to-move-json-file"),
        (["--list", "--additional"], "--additional does not go with --list"),
        (["--verify", "--broker-list", "1", "--reassignment-json-file", "f"], "--broker-list does"),
    ],
)
def test_usage_errors_end_the_command_before_it_connects(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["reassign", *argv, "--bootstrap-server", "127.0.0.1:1"])
    assert run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"samsa reassign: {words}") and err.count("\n") == 1, err


def test_cluster_status_does_not_count_replicas_being_added_as_missing() -> None:
    """A partition moving to [2, 3]: replicas 2,3,1, ISR 1, adding 2,3 — the new replicas are
    catching up, not lost; it is listed as reassigning until the move ends."""
    assert partition_status(PartitionInfo(0, 1, 1, (2, 3, 1), (1,), (2, 3), (1,))) == "reassigning"
    assert partition_status(PartitionInfo(0, 1, 1, (2, 1), (2,), (2,), (1,))) == "under-replicated"
    assert partition_status(PartitionInfo(0, 1, 1, (1, 2), (1,))) == "under-replicated"
    assert partition_status(PartitionInfo(0, 1, 1, (1, 2), (2, 1))) == "ok"
    assert partition_status(PartitionInfo(0, -1, 1, (1,), ())) == "OFFLINE"

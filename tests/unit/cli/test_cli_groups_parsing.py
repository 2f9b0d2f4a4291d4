"""Goal: `samsa groups` parses as Kafka's kafka-consumer-groups.sh users expect (one reset
strategy, required; --partitions as a list; a dry run unless --execute) and prints tables a person
reads: members with their partitions per topic, lag with "-" for what is unknown and a total.

Method: the real argparse tree of `samsa` (main.py adds it) and the pure formatting functions of
group_commands.py on hand-made SDK dataclasses; nothing connects to a cluster (the end-to-end runs
are in tests/integration/test_cli_groups.py).
"""

from __future__ import annotations

import argparse

import pytest

from samsa.cli.commands import add_commands
from samsa.cli.group_commands import describe_lines, format_partitions, lag_lines, reset_strategy
from samsa.client.admin import ConsumerGroupDescription, PartitionLag
from samsa.client.group_admin import MemberDescription
from samsa.common.errors import ErrorCode


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def test_every_action_parses() -> None:
    assert parse("groups", "list").action == "list"
    assert parse("groups", "describe", "g").group == "g"
    assert parse("groups", "lag", "g", "--bootstrap-server", "h:1").bootstrap_server == "h:1"
    assert parse("groups", "delete", "a", "b").groups == ["a", "b"]


def test_reset_offsets_needs_exactly_one_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("groups", "reset-offsets", "g", "--topic", "t", "--to-earliest")
    assert (args.execute, args.partitions, reset_strategy(args)) == (
        False,
        None,
        ("to-earliest", 0),
    )
    for argv in (
        ("groups", "reset-offsets", "g", "--topic", "t"),
        ("groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"),
        ("groups", "reset-offsets", "g", "--to-latest"),  # --topic is required
    ):
        with pytest.raises(SystemExit) as exited:
            parse(*argv)
        assert exited.value.code == 2
    assert "usage" in capsys.readouterr().err


def test_reset_strategies_and_their_values() -> None:
    base = ("groups", "reset-offsets", "g", "--topic", "t")
    assert reset_strategy(parse(*base, "--to-latest", "--execute")) == ("to-latest", 0)
    assert reset_strategy(parse(*base, "--to-offset", "42")) == ("to-offset", 42)
    assert reset_strategy(parse(*base, "--shift-by", "-3")) == ("shift-by", -3)
    assert reset_strategy(parse(*base, "--to-datetime", "1700000000000")) == (
        "to-datetime",
        1_700_000_000_000,
    )
    strategy, at_ms = reset_strategy(parse(*base, "--to-datetime", "2024-01-02T03:04:05+00:00"))
    assert (strategy, at_ms) == ("to-datetime", 1_704_164_645_000)
    with pytest.raises(SystemExit, match="--to-datetime 'yesterday' is neither"):
        reset_strategy(parse(*base, "--to-datetime", "yesterday"))


def test_partitions_are_a_comma_separated_list(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("groups", "reset-offsets", "g", "--topic", "t", "--to-latest")
    assert parse(*base, "--partitions", "3,0,1,0").partitions == [0, 1, 3]
    for bad in ("one", "1,x", ",", "-1"):
        with pytest.raises(SystemExit):
            parse(*base, "--partitions", bad)
    assert "--partitions" in capsys.readouterr().err


def test_partitions_are_shown_per_topic() -> None:
    assert format_partitions([("orders", 1), ("audit", 2), ("orders", 0)]) == "audit:2 orders:0,1"
    assert format_partitions([]) == "-"


def test_describe_shows_the_group_then_one_row_per_member() -> None:
    group = ConsumerGroupDescription(
        "payments",
        "Reconciling",
        6,
        6,
        "uniform",
        (
            MemberDescription("m-1", "", "app", 6, (("t", 0), ("t", 1)), (("t", 0),)),
            MemberDescription("m-2", "static-2", "", 5, (), (("t", 1),)),
        ),
    )
    lines = describe_lines(group).splitlines()
    assert lines[0] == (
        "group payments  state Reconciling  group epoch 6  assignment epoch 6  "
        "assignor uniform  members 2"
    )
    assert lines[2].split() == ["member", "instance", "client", "epoch", "assignment", "target"]
    assert lines[3].split() == ["m-1", "-", "app", "6", "t:0,1", "t:0"]
    assert lines[4].split() == ["m-2", "static-2", "-", "5", "-", "t:1"]
    empty = ConsumerGroupDescription("idle", "Empty", 3, 3, "uniform", ())
    assert describe_lines(empty).endswith("members 0")


def test_lag_shows_unknowns_as_dashes_and_totals_what_is_known() -> None:
    rows = [
        PartitionLag("t", 0, 5, 20, 15, "m-1", ErrorCode.NONE),
        PartitionLag("t", 1, -1, 9, -1, "", ErrorCode.NONE),
        PartitionLag("t", 2, 3, 7, 4, "", ErrorCode.NONE),
    ]
    lines = lag_lines("g", rows).splitlines()
    assert lines[0].split() == ["topic", "partition", "committed", "log", "end", "lag", "owner"]
    assert lines[1].split() == ["t", "0", "5", "20", "15", "m-1"]
    assert lines[2].split() == ["t", "1", "-", "9", "-", "-"]
    assert lines[-1].startswith("total lag 19 (1 partition(s) unknown")
    assert lag_lines("g", rows[:1]).splitlines()[-1] == "total lag 15"
    assert "no committed offsets" in lag_lines("g", [])


def test_topics_alter_without_a_change_says_what_to_give_before_connecting():
    from samsa.cli.topic_changes import alter_topic

    args = parse("topics", "alter", "orders")
    with pytest.raises(SystemExit, match="say what to change"):
        alter_topic(None, args)  # type: ignore[arg-type]  # never reached: no admin call
    args = parse("topics", "alter", "orders", "--config", "a=1", "--delete-config", "a")
    with pytest.raises(SystemExit, match="both set and deleted"):
        alter_topic(None, args)  # type: ignore[arg-type]


def test_delete_records_offsets_are_offsets_or_latest():
    from samsa.cli.topic_changes import records_offset

    assert records_offset("0") == 0
    assert records_offset("1200") == 1200
    assert records_offset("latest") == -1 == records_offset("-1")
    for bad in ("-2", "soon", ""):
        with pytest.raises(SystemExit, match="must be an offset"):
            records_offset(bad)
    args = parse("topics", "delete-records", "orders", "--offset", "5", "--partition", "1")
    assert (args.name, args.offset, args.partition) == ("orders", "5", [1])

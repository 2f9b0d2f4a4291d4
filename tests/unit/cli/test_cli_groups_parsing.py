"""Goal: `samsa groups` parses as Kafka's kafka-consumer-groups.sh users expect (one reset
strategy, required; one scope, --topic (repeatable, topic:0,1) or --all-topics; --partitions as a
list; ISO 8601 durations for --by-duration; a dry run unless --execute) and prints tables a person
reads: members with their partitions per topic, lag with "-" for what is unknown and a total.

Method: the real argparse tree of `samsa` (main.py adds it) and the pure formatting functions of
group_format.py on hand-made SDK dataclasses; nothing connects to a cluster (the end-to-end runs
are in tests/integration/test_cli_groups.py; the newer views and the group selection are in
test_cli_group_format.py).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import pytest

from samsa.cli.command_support import (
    offsets_csv,
    parse_duration_ms,
    parse_offsets_csv,
    parse_time,
)
from samsa.cli.commands import add_commands, run
from samsa.cli.group_commands import groups_usage_error
from samsa.cli.group_format import describe_lines, format_partitions, lag_lines
from samsa.cli.group_reset import reset_scope, reset_strategy, reset_usage_error
from samsa.cli.topic_offsets import offset_spec
from samsa.client.admin import ConsumerGroupDescription, PartitionLag
from samsa.client.group_admin import MemberDescription
from samsa.common.errors import ErrorCode


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def test_every_action_parses() -> None:
    assert parse("groups", "list").action == "list"
    assert parse("groups", "describe", "g").groups == ["g"]
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
    ):
        with pytest.raises(SystemExit) as exited:
            parse(*argv)
        assert exited.value.code == 2
    assert "usage" in capsys.readouterr().err
    # A scope is required too, checked before connecting (reset_usage_error, exit 2).
    assert "name the partitions" in str(
        reset_usage_error(parse("groups", "reset-offsets", "g", "--to-latest"))
    )


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


@pytest.fixture
def new_york_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone is New York's (UTC-5 in January) for the test."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("new_york_time")
def test_a_time_that_names_no_zone_is_utc_on_every_machine() -> None:
    """Kafka's tools read `2024-01-02T03:04:05.000` as UTC (Utils.getDateTime appends "Z"); read
    as the machine's local time, a reset run in New York moved the group 5 hours off."""
    for text in ("2024-01-02T03:04:05.000", "2024-01-02T03:04:05", "2024-01-02T03:04:05Z"):
        assert parse_time(text, "--to-datetime") == 1_704_164_645_000, text
    assert parse_time("2024-01-02T03:04:05.123+01:00", "--to-datetime") == 1_704_161_045_123
    assert parse_time("2024-01-02", "--from-time") == 1_704_153_600_000
    base = ("groups", "reset-offsets", "g", "--topic", "t", "--to-datetime")
    assert reset_strategy(parse(*base, "2024-01-02T03:04:05")) == ("to-datetime", 1_704_164_645_000)


def test_a_time_no_record_can_have_is_one_line() -> None:
    """Before 1970, or past int64 ms: ListOffsets refuses such a target time (Kafka's
    offsetsForTimes too), and the SDK's ValueError was a traceback from --to-datetime,
    --by-duration, consume --from-time and topics offsets --time."""
    for text in ("1960-01-01T00:00:00", "1969-12-31T23:59:59.999Z", "99999999999999999999"):
        with pytest.raises(SystemExit, match=f"--from-time '{text}' is (before 1970|past)"):
            parse_time(text, "--from-time")
    assert parse_time("1970-01-01T00:00:00Z", "--from-time") == 0
    base = ("groups", "reset-offsets", "g", "--topic", "t")
    with pytest.raises(SystemExit, match="--by-duration 'P100000D' is before 1970"):
        reset_strategy(parse(*base, "--by-duration", "P100000D"))
    with pytest.raises(SystemExit, match="--to-datetime '1960-01-01' is before 1970"):
        reset_strategy(parse(*base, "--to-datetime", "1960-01-01"))
    with pytest.raises(SystemExit, match="--time '1960-01-01' is before 1970"):
        offset_spec("1960-01-01")


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


# --- reset-offsets: Kafka's scopes, strategies and modes --------------------------------------


def test_topics_repeat_and_may_name_partitions(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("groups", "reset-offsets", "g", "--to-latest")
    args = parse(*base, "--topic", "orders:2,0", "--topic", "audit")
    assert args.topic == [("orders", [0, 2]), ("audit", None)]
    assert not args.all_topics
    for bad in (":1", "orders:", "orders:x", "orders:-1"):
        with pytest.raises(SystemExit) as exited:
            parse(*base, "--topic", bad)
        assert exited.value.code == 2
    assert "--topic" in capsys.readouterr().err


def test_all_topics_or_topics_or_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("groups", "reset-offsets", "g")
    all_topics = parse(*base, "--all-topics", "--to-earliest")
    assert all_topics.all_topics and reset_usage_error(all_topics) is None
    with pytest.raises(SystemExit) as exited:
        parse(*base, "--all-topics", "--topic", "t", "--to-earliest")
    assert exited.value.code == 2
    capsys.readouterr()
    from_file = parse(*base, "--from-file", "plan.csv")
    assert reset_strategy(from_file) == ("from-file", 0) and reset_usage_error(from_file) is None
    for argv, wrong in (
        ((*base, "--to-earliest"), "name the partitions"),
        ((*base, "--all-topics", "--partitions", "0", "--to-earliest"), "--partitions goes with"),
        ((*base, "--from-file", "plan.csv", "--topic", "t"), "--from-file names its partitions"),
        ((*base, "--from-file", "plan.csv", "--all-topics"), "--from-file names its partitions"),
    ):
        assert wrong in str(reset_usage_error(parse(*argv)))


def test_dry_run_or_execute_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    base = ("groups", "reset-offsets", "g", "--topic", "t", "--to-latest")
    dry = parse(*base, "--dry-run")
    assert (dry.dry_run, dry.execute) == (True, False)
    with pytest.raises(SystemExit) as exited:
        parse(*base, "--dry-run", "--execute")
    assert exited.value.code == 2
    capsys.readouterr()


def test_partitions_apply_to_one_topic_that_names_none() -> None:
    assert reset_scope([("t", None)], [0, 1]) == [("t", [0, 1])]
    assert reset_scope([("t", [2]), ("u", None)], None) == [("t", [2]), ("u", None)]
    base = ("groups", "reset-offsets", "g", "--to-latest", "--partitions", "0")
    assert reset_usage_error(parse(*base, "--topic", "t")) is None
    for scope in (("--topic", "t", "--topic", "u"), ("--topic", "t:2"), ("--all-topics",)):
        assert "--partitions goes with one --topic" in str(reset_usage_error(parse(*base, *scope)))


def test_to_current_and_by_duration() -> None:
    base = ("groups", "reset-offsets", "g", "--topic", "t")
    assert reset_strategy(parse(*base, "--to-current")) == ("to-current", 0)
    now_ms = 1_700_000_000_000
    by_hour = parse(*base, "--by-duration", "PT1H")
    assert reset_strategy(by_hour, now_ms) == ("to-datetime", now_ms - 3_600_000)
    with pytest.raises(SystemExit, match="--by-duration '1h' is not an ISO 8601 duration"):
        reset_strategy(parse(*base, "--by-duration", "1h"), now_ms)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("pt30m", 1_800_000),
        ("P1DT12H", 129_600_000),
        ("P2D", 172_800_000),
        ("PT0.5S", 500),
        ("PT1H30M15.25S", 5_415_250),
        ("-PT1M", -60_000),
        ("PT-1.5S", -1_500),
    ],
)
def test_durations_read_as_javas_duration_parse(text: str, ms: int) -> None:
    assert parse_duration_ms(text, "--by-duration") == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "P1H", "PT1X", "PT1.5M", "PT1H2H"])
def test_what_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(SystemExit, match="is not an ISO 8601 duration"):
        parse_duration_ms(text, "--by-duration")


def test_an_exported_plan_reads_back_as_the_same_offsets() -> None:
    text = offsets_csv([("orders", 0, 5), ("orders", 3, 0), ("a.b-c_d", 1, 12)])
    assert text == "orders,0,5\norders,3,0\na.b-c_d,1,12\n"  # Kafka's lines, no header
    assert parse_offsets_csv(text + "\n", "plan.csv") == {
        ("orders", 0): 5,
        ("orders", 3): 0,
        ("a.b-c_d", 1): 12,
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("orders,0\n", "line 1: 'orders,0' is not topic,partition,offset"),
        ("orders,0,5\norders,x,5\n", "line 2"),
        ("orders,0,-1\n", "line 1"),
        (",0,1\n", "line 1"),
        ("orders,0,1,2\n", "line 1"),
        ("orders,0,1\norders,0,2\n", "line 2: orders-0 comes twice"),
        ("\n\n", "names no offsets"),
    ],
)
def test_a_bad_offsets_file_names_its_first_bad_line(text: str, says: str) -> None:
    with pytest.raises(SystemExit, match=says):
        parse_offsets_csv(text, "plan.csv")


def test_a_reset_without_a_scope_is_a_usage_error_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    nobody = ("--bootstrap-server", "127.0.0.1:1")  # nothing listens there: never reached
    assert run(parse("groups", "reset-offsets", "g", "--to-latest", *nobody)) == 2
    assert "name the partitions" in capsys.readouterr().err


def test_kafkas_group_flag_names_the_group_as_the_positional_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """kafka-consumer-groups.sh takes `--group G`; a Kafka user's command line used to end in
    'unrecognized arguments: --group'."""
    for action in ("describe", "lag", "delete"):
        args = parse("groups", action, "--group", "a", "b", "--group", "a")
        assert groups_usage_error(args) is None
        assert args.groups == ["b", "a"]
    for action, rest in (
        ("reset-offsets", ["--all-topics", "--to-latest"]),
        ("delete-offsets", ["--topic", "t"]),
    ):
        args = parse("groups", action, "--group", "g", *rest)
        assert groups_usage_error(args) is None and args.group == "g"
        args = parse("groups", action, "g", "--group", "g", *rest)
        assert groups_usage_error(args) is None and args.group == "g"
    nobody = ("--bootstrap-server", "127.0.0.1:1")  # nothing listens there: never reached
    assert run(parse("groups", "reset-offsets", "a", "--group", "b", "--to-latest", *nobody)) == 2
    assert "two groups given" in capsys.readouterr().err
    assert run(parse("groups", "delete-offsets", "--topic", "t", *nobody)) == 2
    assert "no group given; name one: samsa groups delete-offsets GROUP" in capsys.readouterr().err

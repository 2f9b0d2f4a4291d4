"""Goal: the kafka-consumer-groups.sh flags `samsa groups` took on behave as a Kafka user expects:
`list --state` (repeatable or comma-separated, any case, an unknown state refused naming ours),
`describe`/`lag`/`delete` of several groups or `--all-groups` (exactly one of the two), and
`describe`'s views `--members`, `--state`, `--offsets` (one at most). Several groups print one
block each, a blank line between, each naming its group; a group that does not exist gets its
line on stderr and the others are still shown (exit status 1).

Method: the real argparse tree of `samsa`; the pure functions of group_format.py on hand-made SDK
dataclasses; `run` with an address nobody listens on, for the usage errors that must come before
connecting (exit 2); and group_commands' loop over groups with a fake Admin that knows two
groups. Nothing connects to a cluster (tests/integration/test_cli_groups.py does).
"""

from __future__ import annotations

import argparse

import pytest

from samsa.cli import group_commands
from samsa.cli.commands import add_commands, run
from samsa.cli.group_commands import groups_usage_error
from samsa.cli.group_format import (
    GROUP_STATES,
    describe_head,
    describe_lines,
    describe_view_lines,
    group_states_of,
    lag_lines,
    listing_lines,
    members_lines,
)
from samsa.client.admin import ConsumerGroupDescription, PartitionLag
from samsa.client.group_admin import ConsumerGroupListing, GroupError, MemberDescription
from samsa.common.errors import ErrorCode

NOBODY = ("--bootstrap-server", "127.0.0.1:1")  # nothing listens there: never reached

PAYMENTS = ConsumerGroupDescription(
    "payments",
    "Stable",
    4,
    4,
    "uniform",
    (MemberDescription("m-1", "", "app", 4, (("t", 0),), (("t", 0),)),),
)
IDLE = ConsumerGroupDescription("idle", "Empty", 2, 2, "uniform", ())
LAGS = {
    "payments": [PartitionLag("t", 0, 5, 20, 15, "m-1", ErrorCode.NONE)],
    "idle": [PartitionLag("t", 1, 3, 3, 0, "", ErrorCode.NONE)],
}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


# --- list --state --------------------------------------------------------------------------------


def test_states_are_read_in_any_case_repeated_or_comma_separated() -> None:
    assert GROUP_STATES == ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
    states, unknown = group_states_of(parse("groups", "list", "--state", "stable").state)
    assert (states, unknown) == ({"Stable"}, [])
    argv = ("groups", "list", "--state", "EMPTY,reconciling", "--state", " Assigning ")
    assert group_states_of(parse(*argv).state) == ({"Empty", "Reconciling", "Assigning"}, [])
    assert group_states_of(["Stable,PreparingRebalance", ""]) == (
        {"Stable"},
        ["PreparingRebalance", ""],
    )
    assert parse("groups", "list").state == []


def test_the_listing_is_a_table_or_no_groups() -> None:
    listings = [
        ConsumerGroupListing("a", "Stable", 2),
        ConsumerGroupListing("b", "Empty", 0),
        ConsumerGroupListing("c", "Reconciling", 1),
    ]
    every = [line.split() for line in listing_lines(listings).splitlines()]
    assert every == [
        ["group", "state", "members"],
        ["a", "Stable", "2"],
        ["b", "Empty", "0"],
        ["c", "Reconciling", "1"],
    ]
    assert listing_lines([]) == "no groups"


def test_an_unknown_state_is_a_usage_error_naming_ours_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert groups_usage_error(parse("groups", "list", "--state", "Stable,empty")) is None
    assert run(parse("groups", "list", "--state", "stable", "--state", "Rebalancing", *NOBODY)) == 2
    err = capsys.readouterr().err
    assert "no state 'Rebalancing'" in err
    assert "Empty, Assigning, Reconciling, Stable, Dead" in err


# --- several groups or --all-groups, exactly one ------------------------------------------------


def test_describe_lag_and_delete_take_several_groups_or_all_groups() -> None:
    for action in ("describe", "lag", "delete"):
        named = parse("groups", action, "a", "b")
        assert (named.groups, named.all_groups) == (["a", "b"], False)
        assert groups_usage_error(named) is None
        every = parse("groups", action, "--all-groups")
        assert (every.groups, every.all_groups) == ([], True)
        assert groups_usage_error(every) is None


@pytest.mark.parametrize("action", ["describe", "lag", "delete"])
def test_groups_and_all_groups_are_exactly_one_before_connecting(
    action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(parse("groups", action, *NOBODY)) == 2
    assert "name one or more groups, or give --all-groups" in capsys.readouterr().err
    assert run(parse("groups", action, "g", "--all-groups", *NOBODY)) == 2
    assert "name groups or give --all-groups, not both" in capsys.readouterr().err


# --- describe's views -----------------------------------------------------------------------------


def test_describe_views_are_flags_one_at_most(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse("groups", "describe", "g").view == "all"
    assert parse("groups", "describe", "g", "--members").view == "members"
    assert parse("groups", "describe", "g", "--state").view == "state"
    assert parse("groups", "describe", "g", "--offsets").view == "offsets"
    assert parse("groups", "lag", "g").view == "offsets"  # lag is describe --offsets
    for pair in (("--members", "--state"), ("--state", "--offsets"), ("--members", "--offsets")):
        with pytest.raises(SystemExit) as exited:
            parse("groups", "describe", "g", *pair)
        assert exited.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_each_view_shows_only_its_part() -> None:
    head = (
        "group payments  state Stable  group epoch 4  assignment epoch 4  assignor uniform  "
        "members 1"
    )
    assert describe_head(PAYMENTS) == head
    assert describe_view_lines(PAYMENTS, "state", titled=False) == head
    members = describe_view_lines(PAYMENTS, "members", titled=False).splitlines()
    assert [line.split() for line in members] == [
        ["member", "instance", "client", "epoch", "assignment", "target"],
        ["m-1", "-", "app", "4", "t:0", "t:0"],
    ]
    everything = describe_view_lines(PAYMENTS, "all", titled=True)
    assert everything == describe_lines(PAYMENTS) == head + "\n\n" + "\n".join(members)
    assert members_lines(IDLE) == "group idle has no members"


def test_tables_name_their_group_when_several_are_shown() -> None:
    titled = members_lines(PAYMENTS, titled=True).splitlines()
    assert titled[0] == "group payments" and titled[1].startswith("member")
    lag = lag_lines("payments", LAGS["payments"], titled=True).splitlines()
    assert lag[0] == "group payments" and lag[1].startswith("topic")
    assert lag_lines("payments", LAGS["payments"]).splitlines()[0].startswith("topic")
    assert (
        lag_lines("x", [], titled=True) == "group x has no committed offsets and owns no partitions"
    )


# --- one block per group; a missing one is said and skipped --------------------------------------


class FakeAdmin:
    """Knows `payments` and `idle`; any other group does not exist (GROUP_ID_NOT_FOUND), and
    `stuck` has no coordinator answering."""

    def describe_consumer_groups(self, group_ids: list[str]) -> dict[str, ConsumerGroupDescription]:
        known = {"payments": PAYMENTS, "idle": IDLE}
        return {group_id: self._known(group_id, known) for group_id in group_ids}

    def describe_consumer_group_lag(self, group_id: str) -> list[PartitionLag]:
        return self._known(group_id, LAGS)

    @staticmethod
    def _known(group_id: str, known: dict) -> object:
        if group_id == "stuck":
            raise GroupError("no coordinator answered", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group_id not in known:
            raise GroupError(f"group {group_id!r} does not exist", ErrorCode.GROUP_ID_NOT_FOUND)
        return known[group_id]


def describe(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    args = parse("groups", *argv)
    status = group_commands._describe_groups(FakeAdmin(), args, args.groups)  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    return status, out, err


def test_several_groups_print_one_block_each_and_a_missing_one_fails_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = describe(capsys, "describe", "payments", "nope", "idle", "--state")
    assert status == 1
    assert out == describe_head(PAYMENTS) + "\n\n" + describe_head(IDLE) + "\n"
    assert err == "samsa groups describe: group 'nope' does not exist (GROUP_ID_NOT_FOUND)\n"

    status, out, err = describe(capsys, "lag", "idle", "payments")
    assert (status, err) == (0, "")
    blocks = out.rstrip("\n").split("\n\ngroup ")
    assert [block.splitlines()[0].removeprefix("group ") for block in blocks] == [
        "idle",
        "payments",
    ]
    assert out.count("total lag") == 2

    # One group prints as before: no title line, the same text as describe_lines.
    status, out, err = describe(capsys, "describe", "payments")
    assert (status, out, err) == (0, describe_lines(PAYMENTS) + "\n", "")


def test_a_coordinator_that_does_not_answer_stops_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(GroupError) as raised:
        describe(capsys, "describe", "payments", "stuck", "idle")
    assert raised.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE

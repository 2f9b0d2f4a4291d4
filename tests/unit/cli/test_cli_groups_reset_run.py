"""Goal: `samsa groups reset-offsets` refuses a group with members, dry run or --execute, with
Kafka's line and exit status 1, before it prints or commits any plan (kafka-consumer-groups.sh
resets only an Empty or Dead group); an Empty group and one that does not exist (Dead) are
reset. An offset clamped to its partition's log gets Kafka's warning on stderr, naming the
partition and the offset used (the plan shows it), dry run, --export or --execute.

Method: group_reset.reset_offsets over a stand-in Admin and Consumer (no cluster); the command
end to end is in tests/integration/test_cli_groups.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from types import SimpleNamespace

import pytest

from samsa.cli import group_reset
from samsa.cli.commands import add_commands
from samsa.cli.group_commands import groups_usage_error
from samsa.client.group_admin import GroupError, TopicPartition
from samsa.common.errors import ErrorCode

EARLIEST, LATEST = 10, 50


class StandInAdmin:
    """Topic `t` of two partitions; the group in `state` (None: it does not exist)."""

    def __init__(self, state: str | None, committed: dict[TopicPartition, int]) -> None:
        self.state = state
        self.committed = committed
        self.altered: dict[TopicPartition, int] | None = None

    def describe_topics(self, names: Iterable[str] = ()) -> dict[str, SimpleNamespace]:
        return {"t": SimpleNamespace(partitions=[SimpleNamespace(partition=p) for p in (0, 1)])}

    def describe_consumer_groups(self, group_ids: list[str]) -> dict[str, SimpleNamespace]:
        if self.state is None:
            raise GroupError.of(ErrorCode.GROUP_ID_NOT_FOUND, "group 'g' does not exist")
        return {group_ids[0]: SimpleNamespace(state=self.state)}

    def list_consumer_group_offsets(
        self, group_id: str, partitions: object = None
    ) -> dict[TopicPartition, SimpleNamespace]:
        return {tp: SimpleNamespace(offset=offset) for tp, offset in self.committed.items()}

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, int]
    ) -> None:
        self.altered = dict(offsets)


class StandInConsumer:
    """Every partition's log is [EARLIEST, LATEST]."""

    def __init__(self, config: object) -> None:
        pass

    def __enter__(self) -> StandInConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def beginning_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, EARLIEST)

    def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, LATEST)


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_reset, "Consumer", StandInConsumer)
    monkeypatch.setattr(group_reset, "require_topic", lambda admin, t: admin.describe_topics()[t])


def reset_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["groups", "reset-offsets", "g", *argv, "--bootstrap-server", "x:1"])
    assert groups_usage_error(args) is None
    return args


@pytest.mark.parametrize("mode", [(), ("--dry-run",), ("--execute",), ("--export",)])
@pytest.mark.parametrize("state", ["Stable", "Reconciling", "Assigning"])
def test_a_group_with_members_is_refused_dry_run_or_not(
    mode: tuple[str, ...], state: str, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin(state, {("t", 0): 20})
    with pytest.raises(SystemExit) as exited:
        group_reset.reset_offsets(admin, reset_args("--topic", "t", "--to-earliest", *mode))  # type: ignore[arg-type]
    assert str(exited.value.code) == (
        "samsa groups reset-offsets: Assignments can only be reset if the group 'g' is "
        f"inactive, but the current state is {state}: stop its consumers first"
    )
    assert capsys.readouterr().out == ""  # no plan shown
    assert admin.altered is None


@pytest.mark.parametrize("state", ["Empty", None])
def test_an_empty_group_or_one_that_does_not_exist_is_reset(
    state: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin(state, {("t", 0): 20})
    assert group_reset.reset_offsets(admin, reset_args("--topic", "t", "--to-earliest")) == 0  # type: ignore[arg-type]
    assert ["t", "0", "20", "10"] in [line.split() for line in capsys.readouterr().out.splitlines()]
    assert admin.altered is None  # a dry run
    args = reset_args("--topic", "t", "--to-earliest", "--execute")
    assert group_reset.reset_offsets(admin, args) == 0  # type: ignore[arg-type]
    assert admin.altered == {("t", 0): EARLIEST, ("t", 1): EARLIEST}


@pytest.mark.parametrize("mode", [(), ("--export",), ("--execute",)])
def test_an_offset_clamped_to_the_log_is_warned_of(
    mode: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin("Empty", {("t", 0): 20, ("t", 1): 30})
    args = reset_args("--topic", "t", "--to-offset", "99", *mode)
    assert group_reset.reset_offsets(admin, args) == 0  # type: ignore[arg-type]
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        "samsa groups reset-offsets: warning: New offset (99) is higher than latest offset for "
        f"topic partition t-{p}. Value will be set to {LATEST}"
        for p in (0, 1)
    ]
    args = reset_args("--topic", "t:0", "--shift-by", "-15", *mode)
    assert group_reset.reset_offsets(admin, args) == 0  # type: ignore[arg-type]
    assert (
        "samsa groups reset-offsets: warning: New offset (5) is lower than earliest offset for "
        f"topic partition t-0. Value will be set to {EARLIEST}"
    ) in capsys.readouterr().err.splitlines()
    args = reset_args("--topic", "t", "--to-offset", "25", *mode)
    assert group_reset.reset_offsets(admin, args) == 0  # type: ignore[arg-type]
    assert "warning" not in capsys.readouterr().err  # within every log: nothing to say

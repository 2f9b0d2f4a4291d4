"""Goal: `samsa leader-election` says what Kafka's kafka-leader-election.sh says, in the CLI's
style: which partitions got a new leader, which needed none (not a failure), each failure on
stderr with its code, exit 1 when any failed; --topic alone means each of its partitions,
--all-topic-partitions every partition (the answer leaves out those needing none, and the
command says so). Usage errors end it before it connects (exit 2).

Method: cli/election_commands.leader_election over a stand-in Admin (no cluster), and
commands.run for the usage errors; the command against a real cluster is
tests/integration/test_leader_election_admin.py.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace
from typing import Any

import pytest

from samsa.cli.commands import add_commands, run
from samsa.cli.election_commands import leader_election
from samsa.client.admin import ElectionError
from samsa.client.cluster_admin import PartitionInfo
from samsa.client.errors import KafkaError, TopicError
from samsa.common.errors import ErrorCode


class StandInAdmin:
    """Topic t has partitions 0-2: 0 is elected, 1 needs none, 2 is refused when `refuse`."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.asked: list[tuple[str, Any]] = []

    def describe_topics(self, names: Any) -> dict[str, Any]:
        partitions = tuple(PartitionInfo(p, 1, 0, (1,), (1,)) for p in range(3))
        return {"t": SimpleNamespace(partitions=partitions)}

    def elect_leaders(self, election_type: str, partitions: Any) -> dict[Any, Any]:
        self.asked.append((election_type, partitions))
        results: dict[Any, KafkaError | None] = {
            ("t", 0): None,
            ("t", 1): TopicError("t-1: leads already", ErrorCode.ELECTION_NOT_NEEDED),
        }
        if partitions is None:  # the controller leaves out those needing no election
            del results[("t", 1)]
        if self.refuse:
            refused = TopicError("t-2: no live replica", ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
            results[("t", 2)] = refused
            error = ElectionError(str(refused), refused.code)
            error.errors = {("t", 2): refused}
            error.results = results
            raise error
        return results


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["leader-election", *argv])


def test_a_topic_names_each_of_its_partitions_and_every_outcome_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = StandInAdmin()
    assert leader_election(admin, parsed("--election-type", "PREFERRED", "--topic", "t")) == 0
    assert admin.asked == [("preferred", [("t", 0), ("t", 1), ("t", 2)])]
    out = capsys.readouterr().out
    assert "Successfully completed leader election (PREFERRED) for partitions t-0" in out
    assert "Valid replica already elected for partitions t-1" in out


def test_a_failure_goes_to_stderr_and_exits_1_beside_the_successes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parsed("--election-type", "unclean", "--topic", "t", "--partition", "2")
    assert leader_election(StandInAdmin(refuse=True), args) == 1
    captured = capsys.readouterr()
    assert "Successfully completed leader election (UNCLEAN) for partitions t-0" in captured.out
    assert "t-2: no live replica (ELIGIBLE_LEADERS_NOT_AVAILABLE)" in captured.err


def test_all_partitions_says_the_others_needed_none(capsys: pytest.CaptureFixture[str]) -> None:
    admin = StandInAdmin()
    assert (
        leader_election(admin, parsed("--election-type", "unclean", "--all-topic-partitions")) == 0
    )
    assert admin.asked == [("unclean", None)]
    out = capsys.readouterr().out
    assert "for partitions t-0" in out and "No other partition needed" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--election-type", "preferred", "--all-topic-partitions", "--partition", "0"], "--topic"),
        (["--election-type", "preferred", "--topic", "t", "--partition", "-1"], ">= 0"),
    ],
)
def test_usage_errors_exit_2_before_connecting(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(parsed(*argv)) == 2
    assert words in capsys.readouterr().err

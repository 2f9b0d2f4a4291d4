"""Goal: `samsa topics alter --partitions N` warns on stderr, as Kafka's kafka-topics.sh does,
that keyed records change partition: the partitioner hashes a key over the partition count, so
many keys' new records go elsewhere than their old ones (order per key is lost across the
change, and a compacted topic keeps a key's old value beside its new one). The partitions were
added in silence. No warning when nothing was added (the same count, or a refusal).

Method: topic_changes.alter_topic over a stand-in Admin; the command against a cluster is in
tests/integration/test_cli_commands.py.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from samsa.cli.commands import add_commands
from samsa.cli.topic_changes import KEYED_PARTITIONS_WARNING, alter_topic
from samsa.client import TopicError
from samsa.common.errors import ErrorCode


class StandInAdmin:
    def __init__(self, count: int) -> None:
        self.count = count

    def describe_topics(self, names: list[str]) -> dict[str, SimpleNamespace]:
        return {name: SimpleNamespace(partitions=[0] * self.count) for name in names}

    def create_partitions(self, counts: dict[str, int], replica_assignments: object = None) -> None:
        (wanted,) = counts.values()
        if wanted <= self.count:
            raise TopicError("partitions can only be added", ErrorCode.INVALID_PARTITIONS)
        self.count = wanted


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["topics", "alter", "orders", *argv])


def test_adding_partitions_warns_that_keys_move(capsys: pytest.CaptureFixture[str]) -> None:
    admin = StandInAdmin(3)
    assert alter_topic(admin, _args("--partitions", "6")) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == "orders: partitions 3 -> 6\n"
    assert err == KEYED_PARTITIONS_WARNING + "\n"
    assert "WARNING" in err and "keys" in err


def test_nothing_added_warns_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert alter_topic(StandInAdmin(3), _args("--partitions", "3")) == 0  # type: ignore[arg-type]
    with pytest.raises(TopicError):
        alter_topic(StandInAdmin(3), _args("--partitions", "2"))  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == "orders: already has 3 partition(s)\n" and err == ""

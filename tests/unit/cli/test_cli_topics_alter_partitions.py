"""Goal: `samsa topics alter --partitions N` warns on stderr, as Kafka's kafka-topics.sh does,
that keyed records change partition: the partitioner hashes a key over the partition count, so
many keys' new records go elsewhere than their old ones (order per key is lost across the
change, and a compacted topic keeps a key's old value beside its new one). The partitions were
added in silence. No warning when nothing was added (the same count, or a refusal). And a
command that changes both configs and partitions is refused whole when the partitions are: the
configs used to change first and stay changed.

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
    def __init__(self, count: int, most: int = 100) -> None:
        self.count = count
        self.most = most  # the controller refuses more partitions than this
        self.configs: dict[str, str] = {}

    def describe_topics(self, names: list[str]) -> dict[str, SimpleNamespace]:
        return {name: SimpleNamespace(partitions=[0] * self.count) for name in names}

    def create_partitions(
        self,
        counts: dict[str, int],
        validate_only: bool = False,
        replica_assignments: object = None,
    ) -> None:
        (wanted,) = counts.values()
        if not self.count < wanted <= self.most:
            raise TopicError("partitions can only be added", ErrorCode.INVALID_PARTITIONS)
        if not validate_only:
            self.count = wanted

    def alter_configs(self, name: str, set: dict[str, str], delete: list[str]) -> None:
        self.configs.update(set)


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


def test_a_refused_partition_count_leaves_the_configs_unchanged() -> None:
    """Configs and partitions are two controller writes: the partitions are checked before the
    configs change, so a refused count does not leave half the command applied."""
    admin = StandInAdmin(3, most=4)
    with pytest.raises(TopicError):
        alter_topic(admin, _args("--partitions", "6", "--config", "retention.ms=1"))  # type: ignore[arg-type]
    assert admin.configs == {} and admin.count == 3
    assert alter_topic(admin, _args("--partitions", "4", "--config", "retention.ms=1")) == 0  # type: ignore[arg-type]
    assert admin.configs == {"retention.ms": "1"} and admin.count == 4

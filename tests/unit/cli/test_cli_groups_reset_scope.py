"""Goal: `samsa groups reset-offsets --all-topics` resets the partitions the group committed
that still exist, and names on stderr those of topics deleted since (whose log offsets no leader
can list: waited for, they cost 45 s and then failed the whole reset); a group whose every
committed partition is gone is told to name its topics.

Method: the command's scope function over a stand-in Admin (no cluster): the coordinator
deletes a deleted topic's offsets itself, so on a real cluster this case is a short race
(tests/integration/test_cli_groups.py runs the command end to end).
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from samsa.cli.group_reset import partitions_to_reset


class StandInAdmin:
    def __init__(self, topics: dict[str, int], committed: list[tuple[str, int]]) -> None:
        self.topics = topics
        self.committed = committed

    def describe_topics(self) -> dict[str, SimpleNamespace]:
        return {
            name: SimpleNamespace(partitions=[SimpleNamespace(partition=p) for p in range(count)])
            for name, count in self.topics.items()
        }

    def list_consumer_group_offsets(self, group: str) -> dict[tuple[str, int], object]:
        return dict.fromkeys(self.committed)


def all_topics() -> argparse.Namespace:
    return argparse.Namespace(group="g", all_topics=True, topic=None, partitions=None)


def test_a_deleted_topics_partitions_are_left_out_and_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = StandInAdmin({"kept": 2}, [("kept", 0), ("gone", 0), ("kept", 1), ("gone", 1)])
    assert partitions_to_reset(admin, all_topics(), None) == [("kept", 0), ("kept", 1)]  # type: ignore[arg-type]
    assert "left out gone-0, gone-1: deleted since committed" in capsys.readouterr().err


def test_a_group_whose_partitions_are_all_gone_is_told_to_name_its_topics() -> None:
    admin = StandInAdmin({}, [("gone", 0)])
    with pytest.raises(SystemExit, match="name the topics with --topic"):
        partitions_to_reset(admin, all_topics(), None)  # type: ignore[arg-type]

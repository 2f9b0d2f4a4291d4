"""Goal: `samsa reassign --throttle` sets KIP-73's throttles as Kafka's tool does — the two rates
on every broker of a moved partition, the leader list (current replicas) and follower list (added
replicas) on each moved topic — before the move starts; `--verify` removes them once every
partition is complete (never while one moves), saying so, and `--preserve-throttles` keeps them;
a --throttle that is not a positive number is refused before the cluster is asked anything.

Method: the commands against test_cli_reassign_run's stand-in Admin, which records every
alter_configs call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_reassign_run import StandInAdmin, parsed, plan

from samsa.cli.reassign_commands import reassign
from samsa.cli.reassign_throttle import RATE_KEYS, throttle_lists
from samsa.client import ConfigResource
from samsa.client.cluster_admin import PartitionInfo

RATES = dict.fromkeys(RATE_KEYS, "200000")


def test_execute_with_a_throttle_sets_rates_and_lists_before_the_move(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    args = parsed(tmp_path, "--execute", "--throttle", "200000", plan=plan((0, [1, 2]), (1, [3])))
    assert reassign(admin, args) == 0  # type: ignore[arg-type]
    assert admin.configs_altered == [
        (ConfigResource("broker", "1"), RATES, ()),
        (ConfigResource("broker", "2"), RATES, ()),
        (ConfigResource("broker", "3"), RATES, ()),
        (
            "t",
            {
                "leader.replication.throttled.replicas": "0:1,1:1",
                "follower.replication.throttled.replicas": "0:2,1:3",
            },
            (),
        ),
    ]
    assert "throttle limit was set to 200000 B/s on brokers 1,2,3" in capsys.readouterr().out
    assert admin.altered  # the move started after


def test_a_partition_that_adds_no_replica_is_not_throttled() -> None:
    assert throttle_lists({("t", 0): (1, 2)}, {("t", 0): (2, 1)}) == {}


def test_verify_removes_the_throttles_only_once_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = StandInAdmin()
    admin.partitions[0] = PartitionInfo(0, 1, 1, (2, 1), (1,), (2,), (1,))
    args = parsed(tmp_path, "--verify", plan=plan((0, [2])))
    assert reassign(admin, args) == 1  # type: ignore[arg-type]
    assert admin.configs_altered == []
    admin.partitions[0] = PartitionInfo(0, 2, 2, (2,), (2,))
    assert reassign(admin, args) == 0  # type: ignore[arg-type]
    assert [target for target, _, _ in admin.configs_altered] == [
        ConfigResource("broker", "1"),
        ConfigResource("broker", "2"),
        ConfigResource("broker", "3"),
        "t",
    ]
    assert all(not set_ and deleted for _, set_, deleted in admin.configs_altered)
    assert "Throttle was removed" in capsys.readouterr().out


def test_verify_preserve_throttles_keeps_them(tmp_path: Path) -> None:
    admin = StandInAdmin()
    args = parsed(tmp_path, "--verify", "--preserve-throttles", plan=plan((0, [1])))
    assert reassign(admin, args) == 0  # type: ignore[arg-type]
    assert admin.configs_altered == []


@pytest.mark.parametrize("value", ["0", "-5", "fast"])
def test_a_bad_throttle_is_refused_before_anything_is_asked(tmp_path: Path, value: str) -> None:
    with pytest.raises(SystemExit, match="--throttle"):
        parsed(tmp_path, "--execute", "--throttle", value, plan=plan((0, [2])))

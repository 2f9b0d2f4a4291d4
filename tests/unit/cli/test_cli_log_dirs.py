"""Goal: `samsa log-dirs --describe` prints what Admin.describe_log_dirs answered as people and
Kafka's tools read it: a replica table and a per-dir totals table, or Kafka's JSON (with
KIP-827's figures beside its keys); a malformed --broker-list or --topic-list is a usage error
(exit 2) before any cluster is asked.

Method: the formatting functions on a hand-built answer (two brokers, one dir each, one with a
storage error), and `samsa.cli.main.main` with malformed flags and an address nothing listens on
(the usage error comes first, so nothing is dialled).
"""

from __future__ import annotations

import json

import pytest

from samsa.cli.log_dirs_commands import log_dirs_json, log_dirs_tables
from samsa.cli.main import main as samsa_main
from samsa.client.errors import KafkaError
from samsa.client.log_dirs import LogDirDescription, ReplicaInfo
from samsa.common.errors import ErrorCode

DESCRIBED = {
    2: {"/b2": LogDirDescription(None, 1000, 400, {("t", 1): ReplicaInfo(30, 0, False)})},
    1: {
        "/b1": LogDirDescription(
            KafkaError("disk gone", ErrorCode.KAFKA_STORAGE_ERROR),
            -1,
            -1,
            {("t", 1): ReplicaInfo(30, 0, False), ("t", 0): ReplicaInfo(20, 0, False)},
        )
    },
}


def test_the_tables_list_each_replica_then_each_dirs_totals() -> None:
    rows = [line.split() for line in log_dirs_tables(DESCRIBED).splitlines()]
    assert rows == [
        ["broker", "dir", "partition", "size", "lag"],
        ["1", "/b1", "t-0", "20", "0"],
        ["1", "/b1", "t-1", "30", "0"],
        ["2", "/b2", "t-1", "30", "0"],
        [],
        ["broker", "dir", "replicas", "size", "total", "bytes", "usable", "bytes", "error"],
        ["1", "/b1", "2", "50", "-1", "-1", "KAFKA_STORAGE_ERROR"],
        ["2", "/b2", "1", "30", "1000", "400", "-"],
    ]


def test_the_json_is_kafkas_with_the_disk_figures() -> None:
    shown = json.loads(log_dirs_json(DESCRIBED))
    assert shown["version"] == 1
    assert [b["broker"] for b in shown["brokers"]] == [1, 2]
    assert shown["brokers"][1]["logDirs"] == [
        {
            "logDir": "/b2",
            "error": None,
            "partitions": [{"partition": "t-1", "size": 30, "offsetLag": 0, "isFuture": False}],
            "totalBytes": 1000,
            "usableBytes": 400,
        }
    ]
    assert shown["brokers"][0]["logDirs"][0]["error"] == "KAFKA_STORAGE_ERROR"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--broker-list", "1,x"], "--broker-list '1,x' is not a list of broker ids"),
        (["--broker-list", "-1"], "--broker-list '-1' is not a list of broker ids"),
        (["--topic-list", "a,,b"], "--topic-list 'a,,b' is not a list of topics"),
    ],
)
def test_a_malformed_list_is_a_usage_error_before_the_cluster_is_asked(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["log-dirs", "--describe", "--bootstrap-server", "127.0.0.1:1", *flags]
    assert samsa_main(argv) == 2
    assert message in capsys.readouterr().err

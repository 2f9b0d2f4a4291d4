"""Goal: `samsa reassign` reads Kafka's reassignment and topics-to-move JSON as Kafka's tool
does, refuses a wrong file whole with one line naming the entry and the field to fix (a plan
applied in part is worse than none), writes JSON it reads back unchanged (the rollback plan
--execute prints), proposes with --generate an assignment spreading leaders and replicas
round-robin over the brokers listed (replica counts kept), and says per partition what
--verify found.

Method: the pure functions of cli/reassignment_plan.py on texts and values built by hand.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from samsa.cli.reassignment_plan import (
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_to_move,
    plan_json,
    propose_assignment,
    verify_lines,
)
from samsa.client.cluster_admin import PartitionInfo


def test_kafkas_file_is_read_in_order_and_log_dirs_ignored() -> None:
    text = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "b", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
                {"topic": "a", "partition": 0, "replicas": [2]},
            ],
        }
    )
    assert list(parse_reassignment_json(text, "f.json").items()) == [
        (("b", 1), (3, 1)),
        (("a", 0), (2,)),
    ]
    assert parse_reassignment_json(
        '{"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}', "f"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "f.json: not JSON"),
        ("[1, 2]", "f.json: expected a JSON object"),
        ('{"version": 2, "partitions": []}', '"version" is 2; only version 1'),
        ('{"version": 1}', '"partitions" must be a list'),
        ('{"version": 1, "partitions": []}', '"partitions" is empty'),
        ('{"partitions": [3]}', "partitions[0] must be an object"),
        ('{"partitions": [{"partition": 0, "replicas": [1]}]}', 'partitions[0]: "topic" must be'),
        ('{"partitions": [{"topic": "t", "replicas": [1]}]}', '"partition" must be a partition'),
        ('{"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}', "not -1"),
        ('{"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}', "not '0'"),
        ('{"partitions": [{"topic": "t", "partition": 0}]}', '(t-0): "replicas" must be a non'),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}', "not []"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": "2,3"}]}', 'not "2,3"'),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, true]}]}', "holds true"),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}', "broker twice"),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
            ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
            "partitions[1] (t-0) comes twice (also partitions[0])",
        ),
    ],
)
def test_a_wrong_file_is_refused_naming_what_to_fix(text: str, words: str) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_reassignment_json(text, "f.json")
    message = str(exited.value.code)
    assert message.startswith("samsa reassign: f.json: ") and words in message, message


def test_topics_to_move_and_the_broker_list_are_read() -> None:
    text = '{"version":1,"topics":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}'
    assert parse_topics_to_move(text, "m.json") == ["a", "b"]
    with pytest.raises(SystemExit, match=r"topics\[1\] must be an object"):
        parse_topics_to_move('{"topics":[{"topic":"a"},"b"]}', "m.json")
    assert parse_broker_list("3, 1,2") == [3, 1, 2]
    for bad in ("1,,2", "1,x", "-1", "1,2,1", ""):
        with pytest.raises(SystemExit, match="--broker-list"):
            parse_broker_list(bad)


def test_the_plan_printed_reads_back_unchanged() -> None:
    plan = {("b", 0): (3, 1), ("a", 1): (2,), ("a", 0): (1, 2)}
    text = plan_json(plan)
    assert text.startswith('{"version":1,"partitions":[{"topic":"a","partition":0,')
    assert parse_reassignment_json(text, "rollback") == plan
    assert list(parse_reassignment_json(text, "rollback")) == sorted(plan)


def test_generate_spreads_leaders_and_replicas_round_robin_keeping_replica_counts() -> None:
    current = {("t", p): (1, 2) for p in range(6)} | {("u", p): (1,) for p in range(3)}
    proposal = propose_assignment(current, [4, 5, 6])
    assert [proposal[("t", p)] for p in range(3)] == [(4, 5), (5, 6), (6, 4)]
    assert all(len(proposal[k]) == len(current[k]) for k in current)
    assert all(len(set(r)) == len(r) for r in proposal.values())
    leaders = Counter(replicas[0] for replicas in proposal.values())
    assert sorted(leaders.values()) == [3, 3, 3], leaders
    held = Counter(b for replicas in proposal.values() for b in replicas)
    assert sorted(held.values()) == [5, 5, 5], held


def test_generate_refuses_more_replicas_than_brokers() -> None:
    with pytest.raises(SystemExit, match="t-0 has 3 replicas but --broker-list names 2"):
        propose_assignment({("t", 0): (1, 2, 3)}, [1, 2])


def test_verify_says_complete_in_progress_or_elsewhere_and_whether_all_are_done() -> None:
    found = {
        ("t", 0): PartitionInfo(0, 2, 1, (2, 3), (2, 3)),
        ("t", 1): PartitionInfo(1, 1, 1, (2, 3, 1), (1,), (2, 3), (1,)),
        ("t", 2): PartitionInfo(2, 1, 1, (1, 2), (1, 2)),
    }
    lines, done = verify_lines({("t", 0): (2, 3)}, found)
    assert lines == ["Reassignment of partition t-0 is complete."] and done
    lines, done = verify_lines({("t", 0): (2, 3), ("t", 1): (2, 3), ("t", 2): (2, 3)}, found)
    assert lines == [
        "Reassignment of partition t-0 is complete.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is 1,2 rather than 2,3.",
    ]
    assert not done
    _, done = verify_lines({("t", 0): (3, 2)}, found)
    assert not done, "replica order is the leader preference: Kafka's tool compares it too"
    # A shrink adds nothing: it moves while its old replicas wait to be removed.
    shrinking = {("t", 3): PartitionInfo(3, 2, 1, (2, 1), (2, 1), (), (1,))}
    assert verify_lines({("t", 3): (2,)}, shrinking) == (
        ["Reassignment of partition t-3 is still in progress."],
        False,
    )

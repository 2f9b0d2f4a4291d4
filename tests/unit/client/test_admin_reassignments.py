"""Goal: Admin.alter_partition_reassignments and list_partition_reassignments (KIP-455) send what
Kafka's admin would mean and read the answers faithfully: None cancels, a target goes in
preference order, a call over admin_request_items_max partitions is split (a server refuses a
larger request whole), every partition is asked before the first refusal is raised and its
`errors` names each refused (topic, partition); a target that cannot be right (empty, a string,
a repeated or non-integer broker id) is refused before anything is sent; a listing reads at
least at the last write's metadata offset (read-your-writes) and maps each reassignment; an
empty selection asks nothing (on the wire an empty list means every partition). DescribeTopics'
adding/removing replicas reach PartitionInfo.

Method: the real Admin with its controller stub replaced by a fake that records each request
and answers by rules; the pure topic_descriptions_of on an answer built by hand.
"""

from __future__ import annotations

from typing import Any

import pytest

from samsa.client.admin import Admin, PartitionReassignment
from samsa.client.cluster_admin import PartitionInfo, topic_descriptions_of
from samsa.client.errors import TopicError
from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c


class FakeController:
    """Answers AlterPartitionReassignments (refusing partitions of topic "gone" and cancels of
    partition 9) and ListPartitionReassignments (partition p of any topic is moving to [p])."""

    def __init__(self) -> None:
        self.altered: list[c.AlterPartitionReassignmentsRequest] = []
        self.listed: list[c.ListPartitionReassignmentsRequest] = []
        self.offset = 100
        self.leave_out: set[tuple[str, int]] = set()

    def AlterPartitionReassignments(self, request: Any, timeout: float) -> Any:
        self.altered.append(request)
        self.offset += 1
        answer = c.AlterPartitionReassignmentsResponse()
        answer.status.metadata_offset = self.offset
        for asked in request.partitions:
            if (asked.topic, asked.partition) in self.leave_out:
                continue
            result = answer.partitions.add(topic=asked.topic, partition=asked.partition)
            if asked.topic == "gone":
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"topic {asked.topic!r} does not exist"
            elif asked.cancel and asked.partition == 9:
                result.error_code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
                result.error_message = "no reassignment in progress"
        return answer

    def ListPartitionReassignments(self, request: Any, timeout: float) -> Any:
        self.listed.append(request)
        answer = c.ListPartitionReassignmentsResponse(metadata_offset=self.offset)
        for topic in request.topics:
            for number in topic.partitions:
                answer.reassignments.add(
                    topic=topic.name,
                    partition=number,
                    replicas=[number, 7],
                    adding_replicas=[number],
                    removing_replicas=[7],
                )
        return answer


@pytest.fixture
def controller() -> FakeController:
    return FakeController()


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch, controller: FakeController) -> Admin:
    admin = Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 2000})
    monkeypatch.setattr(admin._controller._metadata, "stub", lambda endpoint: controller)
    return admin


def test_targets_go_in_preference_order_and_none_cancels(
    admin: Admin, controller: FakeController
) -> None:
    admin.alter_partition_reassignments({("t", 0): [3, 1, 2], ("t", 1): None, ("u", 4): (2,)})
    (request,) = controller.altered
    assert [(p.topic, p.partition, list(p.replicas), p.cancel) for p in request.partitions] == [
        ("t", 0, [3, 1, 2], False),
        ("t", 1, [], True),
        ("u", 4, [2], False),
    ]


def test_a_large_call_is_split_and_every_refusal_named_once_all_were_asked(
    admin: Admin, controller: FakeController
) -> None:
    step = limits.admin_request_items_max
    wanted: dict[tuple[str, int], list[int] | None] = {("gone", 0): [1]}
    wanted.update({("t", p): [1, 2] for p in range(2 * step)})
    wanted[("t", 9)] = None
    wanted[("gone", 1)] = [2]
    with pytest.raises(TopicError) as raised:
        admin.alter_partition_reassignments(wanted)
    assert [len(r.partitions) for r in controller.altered] == [step, step, 2]
    assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert str(raised.value) == "partition gone-0: topic 'gone' does not exist"
    assert {k: e.code for k, e in raised.value.errors.items()} == {
        ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 9): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        ("gone", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert str(raised.value.errors[("t", 9)]).startswith("partition t-9: ")


def test_a_partition_the_answer_leaves_out_is_not_taken_as_done(
    admin: Admin, controller: FakeController
) -> None:
    controller.leave_out = {("t", 1)}
    with pytest.raises(TopicError, match="t-1: the controller's answer left it out") as raised:
        admin.alter_partition_reassignments({("t", 0): [1], ("t", 1): [2]})
    assert list(raised.value.errors) == [("t", 1)]
    assert raised.value.code == ErrorCode.UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize(
    ("wanted", "words", "code"),
    [
        ({("t", 0): []}, "t-0: the target replica list is empty", "INVALID_REPLICA_ASSIGNMENT"),
        ({("t", 0): "2,3"}, "t-0: replicas '2,3' is not a list", "INVALID_REPLICA_ASSIGNMENT"),
        ({("t", 0): 2}, "t-0: replicas 2 is not a list", "INVALID_REPLICA_ASSIGNMENT"),
        ({("t", 0): [1, "2"]}, "replica '2' is not a broker id", "INVALID_REPLICA_ASSIGNMENT"),
        ({("t", 0): [True]}, "replica True is not a broker id", "INVALID_REPLICA_ASSIGNMENT"),
        ({("t", 0): [1, -1]}, "broker id -1 is out of range", "INVALID_REPLICA_ASSIGNMENT"),
        ({("t", 0): [1, 2, 1]}, "names broker 1 twice", "INVALID_REPLICA_ASSIGNMENT"),
        ({"t": [1]}, "'t' is not a partition", "INVALID_REQUEST"),
        ({("t", -1): [1]}, "is not a partition", "INVALID_REQUEST"),
    ],
)
def test_a_target_that_cannot_be_right_is_refused_before_anything_is_sent(
    admin: Admin, controller: FakeController, wanted: Any, words: str, code: str
) -> None:
    with pytest.raises(TopicError, match=words) as raised:
        admin.alter_partition_reassignments({("ok", 0): [1], **wanted})
    assert raised.value.code == ErrorCode[code]
    assert controller.altered == []


def test_listing_reads_its_own_writes_and_maps_each_reassignment(
    admin: Admin, controller: FakeController
) -> None:
    admin.alter_partition_reassignments({("t", 0): [1]})
    found = admin.list_partition_reassignments([("t", 2), ("u", 0), ("t", 5), ("t", 2)])
    (request,) = controller.listed
    assert request.min_metadata_offset == 101, "at least the write's offset"
    assert [(t.name, list(t.partitions)) for t in request.topics] == [("t", [2, 5]), ("u", [0])]
    assert found == {
        ("t", 2): PartitionReassignment((2, 7), (2,), (7,)),
        ("u", 0): PartitionReassignment((0, 7), (0,), (7,)),
        ("t", 5): PartitionReassignment((5, 7), (5,), (7,)),
    }


def test_listing_all_names_nothing_and_listing_none_asks_nothing(
    admin: Admin, controller: FakeController
) -> None:
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments([]) == {}
    assert len(controller.listed) == 1 and not controller.listed[0].topics


def test_listing_many_partitions_is_split(admin: Admin, controller: FakeController) -> None:
    step = limits.admin_request_items_max
    found = admin.list_partition_reassignments([(f"t{p % 3}", p) for p in range(step + 5)])
    sizes = [sum(len(t.partitions) for t in r.topics) for r in controller.listed]
    assert sizes == [step, 5] and len(found) == step + 5


def test_described_partitions_carry_the_replicas_being_added_and_removed() -> None:
    topic = c.DescribeTopicsResponse.Topic(name="t", topic_id=b"\x01" * 16)
    topic.partitions.add(
        partition=0,
        leader=1,
        leader_epoch=2,
        replicas=[2, 3, 1],
        isr=[1],
        adding_replicas=[2, 3],
        removing_replicas=[1],
    )
    topic.partitions.add(partition=1, leader=2, leader_epoch=0, replicas=[2], isr=[2])
    info = topic_descriptions_of([topic])["t"].partitions
    assert info == (
        PartitionInfo(0, 1, 2, (2, 3, 1), (1,), (2, 3), (1,)),
        PartitionInfo(1, 2, 0, (2,), (2,)),
    )

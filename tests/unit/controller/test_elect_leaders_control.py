"""Goal: ElectLeaders (KIP-460) elects what the operator asks and nothing else: a preferred
replica only when it is live and in the ISR, an unclean leader only for a partition without a live
leader (whatever the topic's unclean.leader.election.enable), replicas a reassignment is adding
last; every refusal has its Kafka code, a message naming the partition, and writes nothing.

Method: images built with the real control plane and replay (test_control_plane's helpers, the
partition t-0 placed by hand by reassignment_helpers); leadership moved by fencing brokers and
ISRs changed by AlterPartition, as on a cluster. Each election is checked for the exact record it
writes and for the image after replay (leader, ISR, leader epoch).
"""

from __future__ import annotations

from reassignment_helpers import T, placed, reassign, state
from test_control_plane import alter, commit, create, heartbeat, register

from samsa.common.errors import ErrorCode
from samsa.metadata.image import NO_LEADER, MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

PREFERRED = c.ELECTION_TYPE_PREFERRED
UNCLEAN = c.ELECTION_TYPE_UNCLEAN


def elect(
    image: MetadataImage, election_type: int, *partitions: tuple[str, int]
) -> tuple[MetadataImage, list[tuple[str, int, int, str]], cp.ControlResult]:
    """Ask for elections; the image after the commit, each answer as (topic, partition, code,
    message), and the result."""
    request = c.ElectLeadersRequest(election_type=election_type)  # type: ignore[arg-type]
    for topic, number in partitions:
        request.partitions.add(topic=topic, partition=number)
    result = cp.elect_leaders(image, request)
    answers = [
        (r.topic, r.partition, r.error_code, r.error_message) for r in result.response.partitions
    ]
    return commit(image, result), answers, result


def fence(image: MetadataImage, *broker_ids: int) -> MetadataImage:
    return commit(image, cp.fence_brokers(image, broker_ids))


def back(image: MetadataImage, broker_id: int) -> MetadataImage:
    """The broker registers again (clean shutdown) and is unfenced."""
    image, _ = register(image, broker_id, incarnation="again")
    image, _ = heartbeat(image, broker_id)
    return image


def moved_away() -> MetadataImage:
    """t-0 on [1, 2, 3]: broker 1 was fenced (2 took over) and is back, live, out of the ISR."""
    image = back(fence(placed([1, 2, 3]), 1), 1)
    assert (state(image).leader, state(image).isr) == (2, (2, 3))
    return image


def refused(answers: list, result: cp.ControlResult, code: int, *words: str) -> None:
    assert not result.records, "a refusal writes nothing"
    ((topic, number, got, message),) = answers
    assert (topic, number, got) == ("t", 0, code), message
    for word in ("t-0", *words):
        assert word in message, message


# --- preferred --------------------------------------------------------------------------------


def test_preferred_gives_leadership_back_to_the_first_replica_once_in_sync() -> None:
    image = moved_away()
    _, answers, result = elect(image, PREFERRED, ("t", 0))
    refused(answers, result, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "not in the ISR")
    image, answer = alter(image, 2, [2, 3, 1])  # broker 1 caught up
    assert answer.error_code == ErrorCode.NONE
    before = state(image)
    after, answers, result = elect(image, PREFERRED, ("t", 0))
    assert answers == [("t", 0, ErrorCode.NONE, "")]
    change = m.PartitionChangeRecord(topic_id=T, partition=0, leader=1)
    assert list(result.records) == [m.MetadataRecord(partition_change=change)]
    now = state(after)
    assert (now.leader, now.isr, now.leader_epoch) == (1, before.isr, before.leader_epoch + 1)
    _, answers, result = elect(after, PREFERRED, ("t", 0))
    refused(answers, result, ErrorCode.ELECTION_NOT_NEEDED, "preferred replica 1 leads")


def test_preferred_refuses_a_fenced_preferred_replica() -> None:
    image = fence(placed([1, 2, 3]), 1)
    _, answers, result = elect(image, PREFERRED, ("t", 0))
    refused(answers, result, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "not live")


def test_preferred_during_a_reassignment_is_the_targets_first_replica() -> None:
    image, answers, _ = reassign(placed([1, 2]), ("t", 0, [3, 1]))
    assert answers == [(ErrorCode.NONE, "")] and state(image).replicas[0] == 3
    _, answers, result = elect(image, PREFERRED, ("t", 0))
    refused(answers, result, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "replica 3")


# --- unclean ----------------------------------------------------------------------------------


def offline() -> MetadataImage:
    """t-0 on [1, 2] (unclean election not allowed by the topic): 2 fell out of the ISR, then
    leader 1 was fenced: no leader, ISR [1]."""
    image, answer = alter(placed([1, 2]), 1, [1])
    assert answer.error_code == ErrorCode.NONE
    image = fence(image, 1)
    assert (state(image).leader, state(image).isr) == (NO_LEADER, (1,))
    return image


def test_unclean_elects_an_out_of_sync_replica_alone_in_the_isr() -> None:
    image = offline()
    epoch = state(image).leader_epoch
    after, answers, result = elect(image, UNCLEAN, ("t", 0))
    assert answers == [("t", 0, ErrorCode.NONE, "")]
    change = m.PartitionChangeRecord(topic_id=T, partition=0, leader=2)
    change.isr.ids.append(2)
    assert list(result.records) == [m.MetadataRecord(partition_change=change)]
    now = state(after)
    assert (now.leader, now.isr, now.leader_epoch) == (2, (2,), epoch + 1)
    _, answers, result = elect(after, UNCLEAN, ("t", 0))
    refused(answers, result, ErrorCode.ELECTION_NOT_NEEDED, "broker 2 leads")


def test_unclean_refuses_a_partition_with_a_live_leader_and_one_with_no_live_replica() -> None:
    _, answers, result = elect(placed([1, 2]), UNCLEAN, ("t", 0))
    refused(answers, result, ErrorCode.ELECTION_NOT_NEEDED, "broker 1 leads")
    _, answers, result = elect(fence(offline(), 2), UNCLEAN, ("t", 0))
    refused(answers, result, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "none of its replicas")


def test_unclean_elects_a_live_isr_member_cleanly_when_there_is_one() -> None:
    image = placed([1, 2, 3])
    # A partition left without a leader while ISR members are live (written by hand: the
    # controller itself would have elected one).
    image = commit(
        image,
        cp.ControlResult(
            [
                m.MetadataRecord(
                    partition_change=m.PartitionChangeRecord(
                        topic_id=T, partition=0, leader=NO_LEADER
                    )
                )
            ],
            None,
        ),
    )
    image = fence(image, 1)
    after, answers, _ = elect(image, UNCLEAN, ("t", 0))
    assert answers == [("t", 0, ErrorCode.NONE, "")]
    assert (state(after).leader, state(after).isr) == (2, (2, 3)), "the live ISR is kept"


def test_unclean_during_a_reassignment_takes_the_adding_replica_last() -> None:
    image, answers, _ = reassign(placed([1, 2]), ("t", 0, [3, 1]))
    assert answers == [(ErrorCode.NONE, "")] and state(image).adding == (3,)
    image, answer = alter(image, 1, [1])
    assert answer.error_code == ErrorCode.NONE
    image = fence(image, 1)
    after, _, _ = elect(image, UNCLEAN, ("t", 0))
    assert state(after).leader == 2, "the replica being removed holds data; the adding one may not"
    after, _, _ = elect(fence(image, 2), UNCLEAN, ("t", 0))
    assert (state(after).leader, state(after).isr) == (3, (3,)), "with no other, the adding one"


# --- the request ------------------------------------------------------------------------------


def test_bad_items_are_refused_one_by_one_and_the_rest_elected() -> None:
    image = offline()
    after, answers, result = elect(
        image, UNCLEAN, ("t", 0), ("t", 0), ("t", -1), ("t", 5), ("nope", 0)
    )
    assert [(t, p, code) for t, p, code, _ in answers] == [
        ("t", 0, ErrorCode.NONE),
        ("t", 0, ErrorCode.INVALID_REQUEST),
        ("t", -1, ErrorCode.INVALID_REQUEST),
        ("t", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert "more than once" in answers[1][3] and ">= 0" in answers[2][3]
    assert "t-5 does not exist" in answers[3][3]
    assert len(result.records) == 1 and state(after).leader == 2


def test_an_unset_election_type_is_refused_whole() -> None:
    _, answers, result = elect(offline(), c.ELECTION_TYPE_UNSPECIFIED, ("t", 0))
    assert not result.records and answers == []
    assert result.response.status.error_code == ErrorCode.INVALID_REQUEST
    assert "PREFERRED" in result.response.status.error_message


def test_naming_no_partition_elects_every_one_and_leaves_out_those_needing_none() -> None:
    image, _ = create(offline(), "u", partitions=2, factor=1)
    after, answers, result = elect(image, UNCLEAN)
    assert answers == [("t", 0, ErrorCode.NONE, "")], "u's partitions have live leaders"
    assert len(result.records) == 1 and state(after).leader == 2
    _, answers, result = elect(after, PREFERRED)
    assert [(t, p, code) for t, p, code, _ in answers] == [
        ("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
    ]

"""Goal: subscribe() to a new topic set while a heartbeat is in flight reaches the coordinator.
The answer to that heartbeat (built before the subscribe(), so without the new subscription) does
not mark the new subscription as sent; a failed heartbeat that carried it sends it again. Kafka's
rule: the fields a heartbeat carried are recorded when it is built, and forgotten when it fails.
(Before the fix any answer marked the current subscription sent, and the coordinator kept the old
topics for ever.)

Method: a pure GroupMember fed hand-made answers (rebalance_helpers.answer) on a manual clock;
the heartbeats it builds afterwards are inspected for the subscription field.
"""

from __future__ import annotations

from rebalance_helpers import T, answer, member

from samsa.client.group_member import GroupMember, MemberState, Subscription
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as cp

NEW = "payments"


def stable() -> GroupMember:
    m = member()
    m.subscribe(Subscription(topics=frozenset({T})), 0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, 0), 0)
    while m.begin_callback() is not None:
        m.on_callback_done(0)
    assert m.heartbeat_request(0) is not None
    m.on_heartbeat_answer(answer(1, 0), 0)
    assert m.state is MemberState.STABLE
    return m


def heartbeats(m: GroupMember, start: int) -> list[cp.ConsumerGroupHeartbeatRequest]:
    sent = []
    for now in range(start, start + 10_000, 100):
        request = m.heartbeat_request(now)
        if request is not None:
            sent.append(request)
            m.on_heartbeat_answer(answer(1, 0), now)
    return sent


def carries_new(request: cp.ConsumerGroupHeartbeatRequest) -> bool:
    return request.HasField("subscription") and list(request.subscription.topic_names) == [NEW]


def test_a_subscribe_while_a_heartbeat_is_in_flight_is_sent_after_its_answer() -> None:
    m = stable()
    regular = m.heartbeat_request(1000)
    assert regular is not None and not regular.HasField("subscription")
    m.subscribe(Subscription(topics=frozenset({NEW})), 1001)  # while it is in flight
    m.on_heartbeat_answer(answer(1, 0), 1002)  # the answer to the heartbeat sent before
    sent = heartbeats(m, 1002)
    assert carries_new(sent[0]), "the new subscription was never sent to the coordinator"
    assert not any(r.HasField("subscription") for r in sent[1:]), "sent once, then unchanged"


def test_a_subscription_whose_heartbeat_failed_is_sent_again() -> None:
    m = stable()
    m.subscribe(Subscription(topics=frozenset({NEW})), 1000)
    first = m.heartbeat_request(1000)
    assert first is not None and carries_new(first)
    m.on_heartbeat_failed(ErrorCode.REQUEST_TIMED_OUT, "timed out", 1001)
    sent = heartbeats(m, 1001)
    assert carries_new(sent[0]), "a failed heartbeat's subscription was taken as sent"

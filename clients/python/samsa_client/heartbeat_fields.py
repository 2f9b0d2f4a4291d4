"""What a consumer-group heartbeat carries besides the member's id and epoch — a pure core.

Theory of operation. Some fields of ConsumerGroupHeartbeatRequest are optional after the join:
"unset means unchanged" (proto/samsa/v1/coordinator.proto), and the coordinator keeps what it was
last told. `SentFields` is the member's record of what that is (Kafka's HeartbeatState and its
SentFields): a field goes into a heartbeat only when it differs from what an earlier heartbeat
carried, and is recorded as sent when the heartbeat is *built* (not when answered, which would
take a change made while a heartbeat was in flight for one it carried). A heartbeat that failed
may or may not have reached the coordinator: `reset()` forgets everything, so the next one
carries every field again, as does a join (epoch 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.v1 import coordinator_pb2 as cp

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Subscription:
    topics: frozenset[str] = frozenset()
    pattern: str = ""

    def to_proto(self) -> cp.ConsumerGroupSubscription:
        return cp.ConsumerGroupSubscription(
            topic_names=sorted(self.topics), topic_regex=self.pattern
        )


def partitions_to_proto(partitions: frozenset[TopicPartition]) -> cp.OwnedPartitions:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return cp.OwnedPartitions(
        topics=[
            cp.TopicPartitions(topic=topic, partitions=sorted(numbers))
            for topic, numbers in sorted(by_topic.items())
        ]
    )


def partitions_from_proto(owned: cp.OwnedPartitions) -> frozenset[TopicPartition]:
    return frozenset((t.topic, p) for t in owned.topics for p in t.partitions)


class SentFields:
    """What the coordinator was last told; see the module docstring."""

    def __init__(self) -> None:
        self.subscription: Subscription | None = None
        self.owned: frozenset[TopicPartition] | None = None

    def reset(self) -> None:
        self.subscription = None
        self.owned = None

    def reconciled(self) -> None:
        """A reconciliation ended: the next heartbeat says what is owned, even if the same set
        as before (Kafka's local assignment epoch), also when the member is STABLE by then (an
        answer to a heartbeat in flight came first); the coordinator may be waiting for it."""
        self.owned = None

    def fill(
        self,
        request: cp.ConsumerGroupHeartbeatRequest,
        subscription: Subscription | None,
        owned: frozenset[TopicPartition],
        *,
        reconciling: bool,
        taking: frozenset[TopicPartition],
    ) -> None:
        """Put into `request` what changed since the last heartbeat built (everything on a
        join), and record it as sent. The owned partitions are not said in the middle of a
        reconciliation (`reconciling`), as by Kafka's consumer: the coordinator would take an
        owned set without the partitions on_assigned is `taking` for ones already given up
        (Kafka's ownsRevokedPartitions) and hand them to another member. When everything must
        be said again (after a failed heartbeat) they are, with `taking` counted in, so those
        are asked back first."""
        if request.member_epoch == 0:
            self.reset()
        if subscription is not None and subscription != self.subscription:
            request.subscription.CopyFrom(subscription.to_proto())
            self.subscription = subscription
        if reconciling:
            if self.owned is not None:
                return
            owned = owned | taking
        if owned != self.owned:
            request.owned_partitions.CopyFrom(partitions_to_proto(owned))
            self.owned = owned

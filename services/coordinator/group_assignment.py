"""Subscriptions, the subscription digest and the target assignment of a group.

Theory of operation. A member subscribes to topic names or to a regular expression (RE2 syntax, as
Kafka's RE2/J, matching whole names in linear time: samsa.common.topic_regex; internal topics, whose
names start with "__", never match). The group's *subscribed topics* are the union of every member's
resolved subscription over the topics that exist now (`topics`: name -> partition count, from the
metadata image). The *subscription digest* is a SHA-256 over those topics and their partition
counts: when it differs from the one stored in the group_metadata record, the metadata moved under
the group (a topic was created, grew, or was deleted) and the group epoch is bumped, which makes the
next heartbeat compute a new target.

The target is computed by the group's assignor whenever group_epoch > assignment_epoch. The
assignor is KIP-848's: the `server_assignor` most members name (members that name none do not
count), ties going to the configured default when it is among them, else to the name first in
sorted order; the configured default when no member names one. It depends only on the members'
current metadata, not on their order or history, so one member's change of mind does not flip
the group's assignor, and every coordinator (and a replay after compaction) picks the same.

Cost: resolving regexes is O(distinct regexes x topics) per call; names are a set union.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping

from samsa.common import limits
from samsa.common.topic_regex import matcher
from samsa.services.coordinator.assignors import MemberSubscription, assignor_named
from samsa.services.coordinator.group_model import (
    ConsumerGroup,
    Member,
    Partitions,
    normal,
    to_topic_partitions,
)
from samsa.v1 import group_records_pb2 as g

INTERNAL_TOPIC_PREFIX = "__"
# The largest target record of one member (about 500 topics with 240-character names, or 60,000
# partitions). Its member reports what it owns (as many bytes) in heartbeats, which are refused
# over group_heartbeat_request_bytes_max, so half of that leaves room for its subscription. And
# the record, and the member's current assignment (which may hold two targets' worth), must fit
# one batch of __consumer_offsets: a batch over max.message.bytes is refused by the broker, which
# fails every group of the partition.
TARGET_RECORD_BYTES_MAX = limits.group_heartbeat_request_bytes_max // 2
assert limits.max_message_bytes_default > 2 * TARGET_RECORD_BYTES_MAX + 64 * 1024


def resolve(
    topic_names: Iterable[str], topic_regex: str, topics: Mapping[str, int]
) -> frozenset[str]:
    """The topics one subscription means now: its names (existing or not) plus the existing
    non-internal topics its regex matches."""
    resolved = set(topic_names)
    if topic_regex:
        matches = matcher(topic_regex)
        resolved.update(
            name for name in topics if not name.startswith(INTERNAL_TOPIC_PREFIX) and matches(name)
        )
    return frozenset(resolved)


def subscribed_topics(members: Iterable[Member], topics: Mapping[str, int]) -> dict[str, int]:
    """Existing topics any member subscribes to -> partition count."""
    names: set[str] = set()
    regexes: set[str] = set()
    for member in members:
        names.update(member.topic_names)
        if member.topic_regex:
            regexes.add(member.topic_regex)
    wanted = set(resolve(names, "", topics))
    for regex in regexes:
        wanted |= resolve((), regex, topics)
    return {name: topics[name] for name in sorted(wanted) if name in topics}


def subscription_digest(subscribed: Mapping[str, int]) -> bytes:
    """SHA-256 of "topic:count" lines, sorted by topic."""
    digest = hashlib.sha256()
    for name in sorted(subscribed):
        digest.update(f"{name}:{subscribed[name]}\n".encode())
    return digest.digest()


def assignor_name_of(group: ConsumerGroup, default: str) -> str:
    """The assignor most members name (see above), else `default`."""
    counts = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    if not counts:
        return default
    most = max(counts.values())
    tied = sorted(name for name, count in counts.items() if count == most)
    return default if default in tied else tied[0]


def compute_target(
    group: ConsumerGroup,
    topics: Mapping[str, int],
    default_assignor: str,
    excluded: frozenset[str] = frozenset(),
) -> dict[str, Partitions]:
    """The new target: member -> partitions (every member present, maybe with nothing; the
    `excluded` members with nothing, as if they subscribed to nothing)."""
    assignor = assignor_named(assignor_name_of(group, default_assignor))
    assert assignor is not None, "assignor names are checked before they are stored"
    subscribed = subscribed_topics(group.members.values(), topics)
    members = [
        MemberSubscription(
            member_id=member.member_id,
            instance_id=member.instance_id or None,
            topics=frozenset()
            if member.member_id in excluded
            else resolve(member.topic_names, member.topic_regex, subscribed),
        )
        for member in group.members.values()
    ]
    target = assignor.assign(members, subscribed, group.target)
    return {member.member_id: normal(target.get(member.member_id, {})) for member in members}


def bounded_target(
    group: ConsumerGroup, topics: Mapping[str, int], default_assignor: str
) -> tuple[dict[str, Partitions], dict[str, int]]:
    """`compute_target`, except that a member whose new target record would take more than
    TARGET_RECORD_BYTES_MAX gets nothing (the others share its partitions, in another round):
    the target, and the bytes each refused member's target would have taken."""
    refused: dict[str, int] = {}
    while True:
        target = compute_target(group, topics, default_assignor, frozenset(refused))
        too_large = {}
        for member_id, partitions in target.items():
            if partitions == group.target.get(member_id, {}):
                continue  # stored already
            value = g.TargetAssignmentMemberValue(partitions=to_topic_partitions(partitions))
            if (size := value.ByteSize()) > TARGET_RECORD_BYTES_MAX:
                too_large[member_id] = size
        if not too_large:
            return target, refused
        refused.update(too_large)  # a round refuses one more member at least: this ends

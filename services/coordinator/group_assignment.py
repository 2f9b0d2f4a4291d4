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

Per-member filtering (Samsa's stricter form of Kafka 4's KAFKA-18813). A member's regex resolves
to the matching topics its principal, at its host, may DESCRIBE under the current ACLs
(`MayDescribe`, judged by the caller: the core does no I/O); its names are not filtered (the
servicer refuses a names subscription the caller may not DESCRIBE). A member whose record carries
no principal (authorization off, or a record written before principals were) is not filtered.
Kafka resolves a regex once for the whole group, under whichever member's heartbeat triggered
the resolution, and refreshes it on a timer; here each member sees only what it may see, judged
again at every heartbeat. So that an ACL change moves partitions, the digest also covers, for
each distinct (regex, principal, host), the matching topics it hides: granting or revoking
DESCRIBE changes the digest, the group epoch is bumped, and the next target adds or drops those
partitions (dropped ones are revoked by the usual reconciliation). Nothing is hidden with ACLs
off or all granted, and the digest is then the one it was before filtering.

Cost: resolving regexes is O(distinct regexes x topics) per call, plus one DESCRIBE question per
distinct (regex, principal, host) and matching topic; names are a set union.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

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


# Whether `principal` at `host` may DESCRIBE `topic` under the current ACLs.
MayDescribe = Callable[[str, str, str], bool]


def describe_anything(_principal: str, _host: str, _topic: str) -> bool:
    """The judge with authorization off: every topic may be described."""
    return True


@dataclass(frozen=True)
class MemberAccess:
    """Who sent a heartbeat (recorded in its member's metadata; "" when nobody is judged) and
    the judge of every member's DESCRIBE, as the servicer builds them from the ACLs."""

    principal: str = ""
    host: str = ""
    may_describe: MayDescribe = describe_anything


UNJUDGED = MemberAccess()

# A regex as one principal at one host sees it: (regex, principal, host).
RegexView = tuple[str, str, str]


def regex_views(
    members: Iterable[Member], topics: Mapping[str, int], may_describe: MayDescribe
) -> dict[RegexView, tuple[frozenset[str], frozenset[str]]]:
    """Each distinct (regex, principal, host) of the members -> (the matching topics it shows,
    those it hides); a member without principal is not judged and hides nothing."""
    matched: dict[str, frozenset[str]] = {}
    views: dict[RegexView, tuple[frozenset[str], frozenset[str]]] = {}
    for member in members:
        regex = member.topic_regex
        view = (regex, member.principal, member.host if member.principal else "")
        if not regex or view in views:
            continue
        if regex not in matched:
            matched[regex] = resolve((), regex, topics)
        matches = matched[regex]
        if not member.principal:
            views[view] = matches, frozenset()
            continue
        hidden = frozenset(t for t in matches if not may_describe(view[1], view[2], t))
        views[view] = matches - hidden, hidden
    return views


def member_topics(
    member: Member,
    views: Mapping[RegexView, tuple[frozenset[str], frozenset[str]]],
) -> frozenset[str]:
    """The topics one member subscribes to now: its names, plus what its regex view shows."""
    if not member.topic_regex:
        return frozenset(member.topic_names)
    view = (member.topic_regex, member.principal, member.host if member.principal else "")
    return frozenset(member.topic_names) | views[view][0]


def subscribed_topics(
    members: Iterable[Member],
    topics: Mapping[str, int],
    may_describe: MayDescribe = describe_anything,
) -> dict[str, int]:
    """Existing topics any member subscribes to (its regex filtered) -> partition count."""
    members = list(members)
    wanted: set[str] = set()
    for member in members:
        wanted.update(member.topic_names)
    for shown, _hidden in regex_views(members, topics, may_describe).values():
        wanted |= shown
    return {name: topics[name] for name in sorted(wanted) if name in topics}


def group_digest(
    members: Iterable[Member], topics: Mapping[str, int], may_describe: MayDescribe
) -> bytes:
    """The subscription digest of the group now: its subscribed topics and, per regex view,
    what the ACLs hide of it (see the module docstring)."""
    members = list(members)
    views = regex_views(members, topics, may_describe)
    hidden = {view: sorted(h) for view, (_shown, h) in views.items() if h}
    return subscription_digest(subscribed_topics(members, topics, may_describe), hidden)


def subscription_digest(
    subscribed: Mapping[str, int], hidden: Mapping[RegexView, list[str]] | None = None
) -> bytes:
    """SHA-256 of "topic:count" lines, sorted by topic; then, when the ACLs hide topics from a
    regex view, one JSON line per view (sorted) naming it and its hidden topics."""
    digest = hashlib.sha256()
    for name in sorted(subscribed):
        digest.update(f"{name}:{subscribed[name]}\n".encode())
    for view in sorted(hidden or {}):
        assert hidden is not None
        digest.update(json.dumps(["hidden", *view, hidden[view]]).encode() + b"\n")
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
    may_describe: MayDescribe = describe_anything,
) -> dict[str, Partitions]:
    """The new target: member -> partitions (every member present, maybe with nothing; the
    `excluded` members with nothing, as if they subscribed to nothing). A member is given only
    topics its subscription resolves to for it (its regex filtered by its DESCRIBE)."""
    assignor = assignor_named(assignor_name_of(group, default_assignor))
    assert assignor is not None, "assignor names are checked before they are stored"
    views = regex_views(group.members.values(), topics, may_describe)
    subscribed = subscribed_topics(group.members.values(), topics, may_describe)
    members = [
        MemberSubscription(
            member_id=member.member_id,
            instance_id=member.instance_id or None,
            topics=frozenset() if member.member_id in excluded else member_topics(member, views),
        )
        for member in group.members.values()
    ]
    target = assignor.assign(members, subscribed, group.target)
    return {member.member_id: normal(target.get(member.member_id, {})) for member in members}


def bounded_target(
    group: ConsumerGroup,
    topics: Mapping[str, int],
    default_assignor: str,
    may_describe: MayDescribe = describe_anything,
) -> tuple[dict[str, Partitions], dict[str, int]]:
    """`compute_target`, except that a member whose new target record would take more than
    TARGET_RECORD_BYTES_MAX gets nothing (the others share its partitions, in another round):
    the target, and the bytes each refused member's target would have taken."""
    refused: dict[str, int] = {}
    while True:
        target = compute_target(group, topics, default_assignor, frozenset(refused), may_describe)
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

"""Rebalance listener calls, run from the application's poll() — the pure half.

Theory of operation. The group member (group_member.py) says which listener call comes next;
Kafka's rule is that it runs on the application's thread, inside `poll()` (or `unsubscribe()` and
`close()`). A call is one *step*:

1. `begin_step` (under the consumer's lock): what goes before the listener. Newly assigned
   partitions join the fetch state, starting at the group's committed offsets (their reset is
   COMMITTED); lost partitions leave it, uncommitted. Revoked partitions are marked pending
   revocation: from now on no poll() returns their records and they are not fetched (Kafka's
   markPendingRevocation, KAFKA-14196), so a poll() inside on_partitions_revoked cannot hand out
   records past the offsets committed before it. With auto-commit on, it returns their consumed
   positions, which the facade commits before the listener runs.
2. The facade calls the listener (and awaits it for the AsyncConsumer).
3. `end_step` (under the lock): revoked partitions leave the fetch state, and the member moves
   on — its acknowledging heartbeat is then due at once, which lets the coordinator give the
   revoked partitions to others. The move happens even when the listener raised (then poll()
   raises it after the move), as in Kafka.

A revoked partition is therefore reported as given back only after `on_partitions_revoked`
returned, and handed out by no poll() once its revocation began. A poll cancelled before its
step ended (an asyncio task cancelled while it awaited the commit or a coroutine listener, or a
KeyboardInterrupt) calls `abandon_step`: the step runs again, from its start, at the next poll
(or unsubscribe, close) rather than stay "running" for ever, which left the member unable to
acknowledge anything or leave. No I/O here: the
facades do the committing and the waking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from samsa.client.errors import (
    AUTHORIZATION_CODES,
    AuthenticationError,
    AuthorizationError,
    KafkaError,
)
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_member import (
    CallbackKind,
    GroupMember,
    MemberState,
    PendingCallback,
    Subscription,
)
from samsa.common.errors import ErrorCode
from samsa.common.topic_regex import TOPIC_REGEX_LENGTH_MAX, pattern_error

TopicPartition = tuple[str, int]


class ConsumerRebalanceListener:
    """Told, from `poll()` on the caller's thread, when the group changes what this consumer
    owns. Revoked partitions are given back in order: commit their offsets here when you commit
    by hand. Lost partitions were taken away (this member was fenced or expired): their offsets
    can no longer be committed. For the AsyncConsumer the methods may be coroutines."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> Any:
        """Before these partitions are given back to the group."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> Any:
        """These partitions were newly assigned (called before their first records). As in
        Kafka, called after every new assignment, the first after joining included, even when
        nothing is new (then with [])."""

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> Any:
        """Instead of on_partitions_revoked when the partitions may already be another's."""
        return self.on_partitions_revoked(partitions)


@dataclass(frozen=True)
class RebalanceStep:
    """One listener call to make, with the offsets to auto-commit before it."""

    callback: PendingCallback
    partitions: list[TopicPartition]  # sorted, as the listener gets them
    commit_first: dict[TopicPartition, OffsetAndMetadata]

    def listener_method(
        self, listener: ConsumerRebalanceListener
    ) -> Callable[[list[TopicPartition]], Any]:
        kind = self.callback.kind
        if kind is CallbackKind.REVOKED:
            return listener.on_partitions_revoked
        if kind is CallbackKind.ASSIGNED:
            return listener.on_partitions_assigned
        return listener.on_partitions_lost


def begin_step(member: GroupMember, state: FetchState, auto_commit: bool) -> RebalanceStep | None:
    """Under the lock: the next listener call (None: none pending, or one running), after what
    goes first. Not begun while one runs (a poll() on another thread, and close()'s unsubscribe
    runs steps too): begin_callback() refuses to, as it would forget the running one."""
    callback = member.pending_callback()
    if callback is None:
        return None
    member.begin_callback()
    partitions = sorted(callback.partitions)
    commit_first: dict[TopicPartition, OffsetAndMetadata] = {}
    assigned = state.assignment()
    if callback.kind is CallbackKind.ASSIGNED:
        state.assign(assigned + [tp for tp in partitions if tp not in set(assigned)])
    elif callback.kind is CallbackKind.LOST:
        state.assign([tp for tp in assigned if tp not in callback.partitions])
    else:
        state.mark_pending_revocation(partitions, True)
        if auto_commit:
            consumed = state.consumed(partitions)
            commit_first = {tp: OffsetAndMetadata(at, e) for tp, (at, e) in consumed.items()}
    return RebalanceStep(callback, partitions, commit_first)


def end_step(member: GroupMember, state: FetchState, step: RebalanceStep, now_ms: int) -> None:
    """Under the lock: the listener returned or raised; see the module docstring."""
    if step.callback.kind is CallbackKind.REVOKED:
        state.assign([tp for tp in state.assignment() if tp not in step.callback.partitions])
    member.on_callback_done(now_ms)


def abandon_step(member: GroupMember, state: FetchState, step: RebalanceStep, now_ms: int) -> None:
    """Under the lock: the facade's poll was cancelled (or interrupted) before the step ended.
    It runs again from its start at the next poll: partitions `begin_step` added for
    on_partitions_assigned leave the fetch state until then (the member does not own them yet:
    lost meanwhile, they would stay behind); partitions it marked pending revocation are
    fetched and handed out again (the step marks them again when it runs). When the member
    moved on meanwhile, the step ends as `end_step` ends it."""
    if not member.abandon_callback(now_ms):
        if step.callback.kind is CallbackKind.REVOKED:
            state.assign([tp for tp in state.assignment() if tp not in step.callback.partitions])
        return
    if step.callback.kind is CallbackKind.ASSIGNED:
        state.assign([tp for tp in state.assignment() if tp not in step.callback.partitions])
    elif step.callback.kind is CallbackKind.REVOKED:
        state.mark_pending_revocation(step.partitions, False)


def check_not_subscribed(group: Any) -> None:
    """Under the lock: assign() is refused while subscribed (Kafka's rule); `group` is the
    consumer's GroupDriver, or None without a group.id."""
    if group is not None and group.member.state is not MemberState.UNSUBSCRIBED:
        raise KafkaError(
            "assign() cannot be used while subscribed: unsubscribe() first",
            ErrorCode.INVALID_REQUEST,
        )


def member_error(member: GroupMember) -> KafkaError | None:
    """Under the lock: the error poll() raises once the member hit a non-retriable one."""
    if member.state is MemberState.FATAL and member.error is not None:
        code, message = member.error
        message = f"consumer group {member.settings.group_id!r}: {message}"
        if code in AUTHORIZATION_CODES:  # the group's (or a topic's) ACLs refused the member
            return AuthorizationError(message, code)
        if code == ErrorCode.SASL_AUTHENTICATION_FAILED:  # its login was refused
            return AuthenticationError(message)
        return KafkaError.of(code, message)
    return None


def raise_member_error(member: GroupMember, lock: Any) -> None:
    """After poll()'s listener calls: a fatal error whose partitions on_partitions_lost just
    released is raised by this poll(), not by the next one (this one would first wait out its
    timeout with nothing to return)."""
    with lock:
        error = member_error(member)
    if error is not None:
        raise error


def subscription_of(topics: str | Iterable[str], pattern: str | None) -> Subscription:
    """What subscribe() was given, checked: topic names, or one regex in RE2 syntax (Kafka's,
    RE2/J) that must match a whole topic name (as Kafka's does)."""
    names = frozenset([topics] if isinstance(topics, str) else (str(t) for t in topics))
    if pattern is not None and names:
        raise ValueError("subscribe() takes topics or a pattern, not both")
    if pattern is None:
        if not names:
            raise ValueError("subscribe() needs topics or a pattern (unsubscribe() to leave)")
        return Subscription(topics=names)
    # The coordinator's own checks (samsa.common.topic_regex): what passes here, it accepts.
    if not pattern:
        raise ValueError("subscribe(pattern='') is empty: give a regex over topic names")
    if len(pattern) > TOPIC_REGEX_LENGTH_MAX:
        raise ValueError(
            f"subscribe(pattern=...) is {len(pattern)} characters, over the coordinator's "
            f"{TOPIC_REGEX_LENGTH_MAX}"
        )
    error = pattern_error(pattern)
    if error is not None:
        raise ValueError(f"subscribe(pattern={pattern!r}) is not a valid regex: {error}")
    return Subscription(pattern=pattern)


def subscribed_topics(
    subscription: Subscription | None, assignment: Iterable[tuple[str, int]]
) -> list[str]:
    """What subscription() answers (Kafka's): the topics given to subscribe(), sorted; for a
    pattern, the topics of the current assignment (the coordinator resolves the regex, KIP-848,
    so those are the matching topics this member knows of); [] when not subscribed."""
    if subscription is None:
        return []
    if subscription.pattern:
        return sorted({topic for topic, _ in assignment})
    return sorted(subscription.topics)

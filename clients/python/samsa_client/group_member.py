"""A consumer's membership in a group (KIP-848, the client's half) — a pure core, one table.

Theory of operation (DESIGN §6). The coordinator computes every assignment; a member only
heartbeats, does what the answer says, and reports what it owns. Each answer carries the member's
epoch and its *full* assignment. When that differs from what the member owns, the member
reconciles: first it gives up what is no longer its own (the application's `on_revoked` runs, and
commits there if it wants), then it takes what is new (`on_assigned`, which Kafka's consumer calls
after every new assignment, the first after joining included, even with nothing new: here too),
then it heartbeats at once with what it now owns, which lets the coordinator hand the revoked
partitions to others (owned partitions are said only then, on join and after a failed heartbeat:
heartbeat_fields.py). A partition is therefore never consumed by two members at once.

The driver (I/O, timers, the application's callbacks) asks this core what to do and tells it what
happened, with numbers for time:

- `heartbeat_request(now_ms)`: the heartbeat to send now, or None (not due, or one in flight);
- `on_heartbeat_answer(answer, now_ms)` / `on_heartbeat_failed(code, message, now_ms)`;
- `pending_callback()`, `begin_callback()` / `on_callback_done(now_ms)`: the one listener call to
  run, at most one at a time (`begin_callback()` asserts none is running), always from the
  application's `poll` (Kafka's rule: callbacks run in the poll thread);
  `abandon_callback(now_ms)` when that poll was cancelled before the call ended (it runs again
  at the next poll). Heartbeats go on while it runs: when the member is fenced, goes stale or
  fails meanwhile, the call's end records what it did to the owned set, and only then is what
  is left lost (on_lost) and the member rejoins;
- `subscribe`, `unsubscribe` (`close` leaves through it), `on_poll`.

States, one table (STYLE habit 4); `_move` asserts every move:

    UNSUBSCRIBED   not in a group                                 -> JOINING
    JOINING        the join heartbeat (epoch 0) is due or in flight  -> STABLE, RECONCILING,
                                                                      FENCED, FATAL, LEAVING
    RECONCILING    running on_revoked, then on_assigned             -> ACKNOWLEDGING, FENCED,
                                                                      FATAL, LEAVING, STALE
    ACKNOWLEDGING  reporting what it now owns (heartbeat due now)    -> STABLE, RECONCILING,
                                                                      FENCED, FATAL, LEAVING, STALE
    STABLE         owns exactly its assignment                      -> RECONCILING, FENCED,
                                                                      FATAL, LEAVING, STALE
    FENCED         the coordinator dropped this member: on_lost (no commit), then rejoin
                                                                   -> JOINING, LEAVING
    STALE          the application missed max.poll.interval.ms: the member left; the next poll
                   runs on_lost and rejoins; a late leave answer is ignored -> JOINING, LEAVING
    LEAVING        on_revoked for what it owns, then the leave heartbeat -> UNSUBSCRIBED
                   (and on to JOINING if subscribe() came meanwhile)
    FATAL          a non-retriable error: on_lost for what it owns, then poll raises it (terminal)

`memberships_ended` counts the moves out of the group (into FENCED, STALE, FATAL, UNSUBSCRIBED):
what the member owned before one is no longer its own, even when it rejoins under the same member
id and is given the same partitions back, so a commit begun before it is never sent after it
(group_commit.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from samsa.client.errors import coded_message
from samsa.client.heartbeat_fields import SentFields, Subscription, partitions_from_proto
from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as cp

TopicPartition = tuple[str, int]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# Answers after which the member finds its coordinator again and retries the heartbeat.
COORDINATOR_MOVED = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION}
)
RETRY_LATER = COORDINATOR_MOVED | {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.REQUEST_TIMED_OUT,
}
# Answers that mean "this member is not (or no longer) in the group": drop everything, rejoin.
FENCED_CODES = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"
    RECONCILING = "reconciling"
    ACKNOWLEDGING = "acknowledging"
    STABLE = "stable"
    FENCED = "fenced"
    STALE = "stale"
    LEAVING = "leaving"
    FATAL = "fatal"


_S = MemberState
_IN_GROUP = frozenset({_S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE})
_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    _S.UNSUBSCRIBED: frozenset({_S.JOINING}),
    _S.JOINING: frozenset({_S.STABLE, _S.RECONCILING, _S.FENCED, _S.FATAL, _S.LEAVING}),
    _S.RECONCILING: frozenset({_S.ACKNOWLEDGING, _S.FENCED, _S.FATAL, _S.LEAVING, _S.STALE}),
    _S.ACKNOWLEDGING: frozenset(
        {_S.STABLE, _S.RECONCILING, _S.FENCED, _S.FATAL, _S.LEAVING, _S.STALE}
    ),
    _S.STABLE: frozenset({_S.RECONCILING, _S.FENCED, _S.FATAL, _S.LEAVING, _S.STALE}),
    _S.FENCED: frozenset({_S.JOINING, _S.LEAVING}),
    _S.STALE: frozenset({_S.JOINING, _S.LEAVING}),
    _S.LEAVING: frozenset({_S.UNSUBSCRIBED}),
    _S.FATAL: frozenset(),
}
# The states a membership ends in: what the member owned is no longer its own in the group.
_OUT_OF_GROUP = frozenset({_S.FENCED, _S.STALE, _S.FATAL, _S.UNSUBSCRIBED})


class CallbackKind(enum.Enum):
    REVOKED = "revoked"  # partitions given back in order: the application may commit first
    ASSIGNED = "assigned"  # partitions newly owned
    LOST = "lost"  # partitions taken away without notice: do not commit them


@dataclass(frozen=True)
class PendingCallback:
    kind: CallbackKind
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class MemberSettings:
    group_id: str
    member_id: str  # made once per consumer (a UUID), so a retried join is the same member
    instance_id: str  # group.instance.id, or "" for a dynamic member
    client_id: str
    rebalance_timeout_ms: int
    max_poll_interval_ms: int
    server_assignor: str  # "" for the coordinator's default
    retry_backoff_ms: int


class GroupMember:
    """One consumer's membership; see the module docstring."""

    def __init__(self, settings: MemberSettings) -> None:
        self.settings = settings
        self.state = MemberState.UNSUBSCRIBED
        self.member_epoch = JOIN_EPOCH
        self.subscription: Subscription | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.target: frozenset[TopicPartition] | None = None  # the last assignment received
        self.error: tuple[ErrorCode, str] | None = None  # set in FATAL once nothing is owned
        self._failure: tuple[ErrorCode, str] | None = None  # the FATAL error, until then
        self.heartbeat_interval_ms = 0
        self.coordinator_needed = True
        self.memberships_ended = 0  # moves into _OUT_OF_GROUP: see the module docstring
        self._callback: PendingCallback | None = None
        self._running: PendingCallback | None = None  # begun, not yet done
        self._heartbeat_due_ms: int | None = None
        self._in_flight = False
        self._in_flight_leave = False
        self._sent = SentFields()  # what the coordinator was last told (heartbeat_fields.py)
        self._last_poll_ms: int | None = None
        self._assigned_due = False  # a new assignment's on_assigned is still to be asked for

    # --- what the application does ----------------------------------------------------------

    def subscribe(self, subscription: Subscription, now_ms: int) -> None:
        """Join (or change what this member subscribes to)."""
        self.subscription = subscription
        if self.state is MemberState.UNSUBSCRIBED:
            self._move(MemberState.JOINING)
            self.member_epoch = JOIN_EPOCH
        self._heartbeat_due_ms = now_ms

    def unsubscribe(self, now_ms: int) -> None:
        """Leave: give everything back (on_revoked), then send the leave heartbeat."""
        if self.state is MemberState.LEAVING:
            self.subscription = None  # a subscribe() since the leave began is taken back
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.LEAVING, MemberState.FATAL):
            return
        self.subscription = None
        if self.state in (MemberState.FENCED, MemberState.STALE):
            # Already out of the group: nothing to give back in order. What it owns is lost
            # (on_lost, as Kafka's close() tells the listener), then the leave heartbeat.
            if self._running is None and self.owned:
                self._callback = PendingCallback(CallbackKind.LOST, self.owned)
            else:
                self.owned = frozenset()
                self._callback = None
        elif self._running is None:  # a listener call not begun: Kafka's leaveGroup drops it
            self._callback = None  # (gives back only what is owned, takes nothing new)
        self._move(MemberState.LEAVING)
        self.target = frozenset()
        if self._callback is None:
            self._next_reconcile_step(now_ms)

    def on_poll(self, now_ms: int) -> None:
        """The application polled: the poll timer restarts; a STALE member rejoins."""
        self._last_poll_ms = now_ms
        if self.state is MemberState.STALE and self._callback is None:
            self._lose_everything(now_ms)  # waits for a running listener call to end

    def check_poll_interval(self, now_ms: int) -> None:
        """Leave the group when the application has not polled for max.poll.interval.ms."""
        if self._last_poll_ms is None or self.state not in _IN_GROUP:
            return
        if now_ms - self._last_poll_ms <= self.settings.max_poll_interval_ms:
            return
        self._move(MemberState.STALE)
        self._callback = None
        self._heartbeat_due_ms = now_ms  # the leave heartbeat

    # --- heartbeats ---------------------------------------------------------------------------

    def heartbeat_request(self, now_ms: int) -> cp.ConsumerGroupHeartbeatRequest | None:
        """The heartbeat to send now (it is then in flight), or None."""
        due = self._heartbeat_due_ms
        if self._in_flight or due is None or now_ms < due:
            return None
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL, MemberState.FENCED):
            return None
        if self.state is MemberState.LEAVING and self._callback is not None:
            return None  # on_revoked first, then the leave heartbeat
        settings = self.settings
        request = cp.ConsumerGroupHeartbeatRequest(
            group_id=settings.group_id,
            member_id=settings.member_id,
            member_epoch=self._epoch_to_send(),
            group_instance_id=settings.instance_id,
            client_id=settings.client_id,
        )
        if request.member_epoch == JOIN_EPOCH:
            request.rebalance_timeout_ms = settings.rebalance_timeout_ms
            request.server_assignor = settings.server_assignor
        if request.member_epoch >= 0:  # with what changed since the last one said
            calls = (self._callback, self._running)
            taking = [c.partitions for c in calls if c and c.kind is CallbackKind.ASSIGNED]
            self._sent.fill(
                request,
                self.subscription,
                self.owned,
                reconciling=self.state is MemberState.RECONCILING,
                taking=frozenset().union(*taking),
            )
        self._in_flight = True
        self._in_flight_leave = request.member_epoch < 0
        self._heartbeat_due_ms = None
        return request

    def _epoch_to_send(self) -> int:
        if self.state in (MemberState.LEAVING, MemberState.STALE):
            return STATIC_LEAVE_EPOCH if self.settings.instance_id else LEAVE_EPOCH
        return self.member_epoch

    def on_heartbeat_answer(self, answer: cp.ConsumerGroupHeartbeatResponse, now_ms: int) -> None:
        code, message = coded_message(answer.error_code, answer.error_message)
        if code is not ErrorCode.NONE:  # one unknown here (a newer server's): UNKNOWN_SERVER_ERROR
            self.on_heartbeat_failed(code, message, now_ms)
            return
        self._in_flight = False
        self.coordinator_needed = False
        if self._late_leave_answer():
            return
        if self.state in (MemberState.LEAVING, MemberState.STALE):
            # The answer to a heartbeat sent before the member decided to leave says nothing
            # that matters now: the leave heartbeat is still due.
            if self._in_flight_leave and self.state is MemberState.LEAVING:
                self._finish_leaving(now_ms)
            return
        self.member_epoch = answer.member_epoch
        self.heartbeat_interval_ms = answer.heartbeat_interval_ms
        self._heartbeat_due_ms = now_ms + answer.heartbeat_interval_ms
        target = partitions_from_proto(answer.assignment)
        if target != self.target:  # a new assignment, or the first one since joining
            self._assigned_due = True  # on_assigned ends its reconciliation, even if empty
            if self._running is None:  # a listener call not begun: recomputed from this one
                self._callback = None
        self.target = target
        if self._callback is None:
            self._next_reconcile_step(now_ms)

    def on_heartbeat_failed(self, code: ErrorCode, message: str, now_ms: int) -> None:
        """An error answer, or a transport failure (pass NETWORK_EXCEPTION)."""
        self._in_flight = False
        self._sent.reset()  # it may not have reached the coordinator: the next one says all
        if self._late_leave_answer():
            return
        if self.state is MemberState.LEAVING and self._in_flight_leave:
            self._finish_leaving(now_ms)  # best effort: the session timeout removes us anyway
            return
        if self.state in (MemberState.LEAVING, MemberState.STALE):
            return
        if code in FENCED_CODES:
            if self.state is MemberState.STALE:
                return
            self._move(MemberState.FENCED)
            self._callback = None
            self._lose_everything(now_ms)
            return
        if code in RETRY_LATER:
            self.coordinator_needed = self.coordinator_needed or code in COORDINATOR_MOVED
            self._heartbeat_due_ms = now_ms + self.settings.retry_backoff_ms
            return
        self._move(MemberState.FATAL)
        self._failure = (code, message)
        self.target = None
        self._callback = None
        self._release_and_fail()

    def _late_leave_answer(self) -> bool:
        """The answer is to a leave heartbeat of a member no longer leaving (a stale member
        that polled since, and is rejoining): it says nothing about the join, which goes out
        next. Kafka ignores it too."""
        if not self._in_flight_leave or self.state is MemberState.LEAVING:
            return False
        self._in_flight_leave = False
        return self.state is not MemberState.STALE

    # --- reconciliation -----------------------------------------------------------------------

    def pending_callback(self) -> PendingCallback | None:
        """The listener call to run now (from the application's poll), if any."""
        return None if self._running is not None else self._callback

    def begin_callback(self) -> PendingCallback | None:
        """The pending listener call, which the caller now runs and ends with on_callback_done
        or abandon_callback (None: there is none). Refused while one runs (ask
        pending_callback() first): taking its place would forget it, and its end would then
        find no call running and fail, or end the wrong one."""
        running = self._running
        assert running is None, f"member: begin_callback() while {running} runs"
        self._running = self._callback
        return self._running

    def on_callback_done(self, now_ms: int) -> None:
        """The running callback returned (or raised: the move happens either way, as in Kafka).
        When the member was fenced, went stale or failed while it ran, the pending callback was
        replaced or dropped: the owned set records what this one did, then what is left is
        lost."""
        callback = self._running
        assert callback is not None, "no callback is running"
        self._running = None
        interrupted = callback is not self._callback
        if not interrupted:
            self._callback = None
        if callback.kind is CallbackKind.REVOKED:
            self.owned = self.owned - callback.partitions
        elif callback.kind is CallbackKind.ASSIGNED:
            self.owned = self.owned | callback.partitions
        else:
            self.owned = frozenset()
            self.member_epoch = JOIN_EPOCH
            if self.state in (MemberState.FENCED, MemberState.STALE):
                self._rejoin(now_ms)
                return
        if self.state is MemberState.FATAL:
            self._release_and_fail()
            return
        if interrupted:
            if self.state is MemberState.FENCED:
                self._callback = None
                self._lose_everything(now_ms)
            elif self.state is MemberState.STALE:
                self.on_poll(now_ms)  # the listener ran inside poll(): lose the rest now
            return
        self._next_reconcile_step(now_ms)

    def abandon_callback(self, now_ms: int) -> bool:
        """The running callback never ended: the application's poll was cancelled (an asyncio
        task) or interrupted while it ran. It is pending again, to run from its start at the
        next poll; True. When the member moved on meanwhile (fenced, stale, failed: the pending
        callback was replaced or dropped) it counts as done instead (False): the caller ends
        it as on_callback_done does."""
        callback = self._running
        assert callback is not None, "no callback is running"
        if callback is not self._callback:
            self.on_callback_done(now_ms)
            return False
        self._running = None
        return True

    def _next_reconcile_step(self, now_ms: int) -> None:
        """Move towards `target`: revoke first, then assign, then acknowledge."""
        target = self.target
        if target is None:
            return
        revoked = self.owned - target
        if revoked:
            if self.state is not MemberState.LEAVING:
                self._move_if_needed(MemberState.RECONCILING)
            self._callback = PendingCallback(CallbackKind.REVOKED, frozenset(revoked))
            return
        if self.state is MemberState.LEAVING:
            self._heartbeat_due_ms = now_ms  # everything given back: send the leave heartbeat
            return
        added = target - self.owned
        if added or self._assigned_due:  # as Kafka's, told even when nothing is new
            self._assigned_due = False
            self._move_if_needed(MemberState.RECONCILING)
            self._callback = PendingCallback(CallbackKind.ASSIGNED, frozenset(added))
            return
        if self.state is MemberState.RECONCILING:
            self._move(MemberState.ACKNOWLEDGING)
            self._sent.reconciled()
            self._heartbeat_due_ms = now_ms  # report what we own at once
        elif self.state in (MemberState.JOINING, MemberState.ACKNOWLEDGING):
            self._move(MemberState.STABLE)

    def _lose_everything(self, now_ms: int) -> None:
        if self._running is not None:
            return  # on_callback_done comes back here once the running listener call ended
        if self.owned:
            self._callback = PendingCallback(CallbackKind.LOST, self.owned)
        else:
            self.member_epoch = JOIN_EPOCH
            self._rejoin(now_ms)

    def _release_and_fail(self) -> None:
        """FATAL: what is owned is lost first (Kafka's transitionToFatal), then poll() raises."""
        if self._running is not None:
            return  # on_callback_done comes back here once the running listener call ended
        if self.owned:
            self._callback = PendingCallback(CallbackKind.LOST, self.owned)
        else:
            self.error = self._failure

    def _rejoin(self, now_ms: int) -> None:
        self.target = None
        if self.subscription is None:
            return
        self._move(MemberState.JOINING)
        self._heartbeat_due_ms = now_ms

    def _finish_leaving(self, now_ms: int) -> None:
        self._move(MemberState.UNSUBSCRIBED)
        self.member_epoch = JOIN_EPOCH
        self.owned = frozenset()
        self.target = None
        self._heartbeat_due_ms = None
        if self.subscription is not None:  # subscribe() came while leaving: join now
            self._move(MemberState.JOINING)
            self._heartbeat_due_ms = now_ms

    def _move_if_needed(self, target: MemberState) -> None:
        if self.state is not target:
            self._move(target)

    def _move(self, target: MemberState) -> None:
        assert target in _TRANSITIONS[self.state], f"member: illegal move {self.state} -> {target}"
        if target in _OUT_OF_GROUP:
            self.memberships_ended += 1
        self.state = target

    def heartbeat_due_ms(self) -> int | None:
        """When the next heartbeat is due (None: nothing to send until something happens)."""
        return None if self._in_flight else self._heartbeat_due_ms

"""One partition's replica on this broker as a pure state machine: who leads, the high watermark
on both sides of replication, and the leader's ISR proposals.

Theory of operation. The metadata log alone sets the role: LEADER (this broker leads at
`leader_epoch`), FOLLOWER (another broker does) or OFFLINE (no leader, or none named yet).
Everything else is an event with the log's offsets passed in; the replica changes its own
fields and says whether the high watermark moved. It does no I/O: `HostedPartition`
(partition_host.py) holds the log and the waiters, and wakes them when told a move happened.

| event                        | roles    | effect                                                |
|------------------------------|----------|-------------------------------------------------------|
| `become_leader`              | any      | LEADER; the epoch starts at the log end; follower     |
|                              |          | progress starts over; a proposal in flight is dropped |
| `become_follower`            | any      | FOLLOWER or OFFLINE; progress and proposal dropped    |
| `stop` (no longer hosted)    | any      | OFFLINE, no leader, no state                          |
| `state_changed` (metadata)   | any      | new ISR and partition epoch; a follower that left the |
|                              |          | ISR must fetch again to rejoin; a proposal the        |
|                              |          | partition epoch moved past is settled                 |
| `follower_fetched`           | LEADER   | the follower's log end and start, by its fetch        |
| `advance_high_watermark`     | LEADER   | up to the smallest log end over the maximal ISR       |
| `take_leader_high_watermark` | FOLLOWER | the leader's, kept within the own log                 |
| `log_changed` (truncation)   | any      | the high watermark kept within the log                |
| `proposal_sent/accepted/     | LEADER   | the maximal ISR, and the partition epoch to await     |
| refused`                     |          |                                                       |

The rules (DESIGN §4; replication.py holds the follower-progress half): on the leader the high
watermark only moves forward, and not while the committed ISR is below min.insync.replicas; it
waits for the *maximal* ISR, the committed one plus the replicas a proposed expansion adds,
until the metadata log or a refusal at the same partition epoch settles the proposal (the
controller may commit the expansion and elect an added replica before this broker hears of
it). A follower's high watermark is the leader's, capped by its own log. No high watermark is
ever outside its log: below the log start or above the log end.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from samsa.metadata.image import PartitionState
from samsa.services.broker.replica.replication import LeaderReplication, high_watermark_within


class Role(enum.Enum):
    OFFLINE = "offline"
    FOLLOWER = "follower"
    LEADER = "leader"


class ProposedIsr(NamedTuple):
    """An ISR a leader proposed, the partition epoch it was decided from, and its followers'
    broker epochs as their fetches were read then (KIP-903: what the controller checks)."""

    isr: tuple[int, ...]
    partition_epoch: int
    broker_epochs: tuple[tuple[int, int], ...] = ()


@dataclass
class PartitionReplica:
    """The replication state of one partition on broker `broker_id`."""

    broker_id: int
    high_watermark: int = 0
    role: Role = Role.OFFLINE
    leader_id: int = -1
    leader_epoch: int = -1
    # The partition's state in the applied metadata image (replicas, ISR, partition epoch).
    state: PartitionState | None = None
    # The followers' progress: set exactly while LEADER.
    leading: LeaderReplication | None = None
    # The log end offset when this broker last became leader (a follower must hold at least
    # that much to rejoin the ISR).
    epoch_start_offset: int = 0
    # Partition epoch of an ISR change the controller accepted, until the metadata log shows it
    # (no second proposal from a stale partition epoch meanwhile).
    awaited_partition_epoch: int = -1
    # The ISR change this leader proposed, until the metadata log or a refusal settles it.
    proposed_isr: ProposedIsr | None = None

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The replicas the high watermark waits for: the ISR, plus those a proposed expansion
        adds until it is settled (Kafka's maximal ISR)."""
        isr = self.isr
        if self.proposed_isr is None:
            return isr
        return isr + tuple(r for r in self.proposed_isr.isr if r not in isr)

    # --- the metadata log ----------------------------------------------------------------------

    def become_leader(
        self, leader_epoch: int, state: PartitionState | None, log_end_offset: int, now_ms: int
    ) -> None:
        """This broker leads from `leader_epoch`: every follower has a full lag window to show
        its progress, and a proposal made under another leadership is forgotten."""
        self.role = Role.LEADER
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.state = state
        self.epoch_start_offset = log_end_offset
        self.proposed_isr = None
        self.leading = LeaderReplication(
            leader_id=self.broker_id,
            replicas=() if state is None else state.replicas,
            now_ms=now_ms,
        )

    def become_follower(
        self, leader_id: int, leader_epoch: int, state: PartitionState | None
    ) -> None:
        """Another broker leads at `leader_epoch` (none: the partition is offline)."""
        self.role = Role.FOLLOWER if leader_id >= 0 else Role.OFFLINE
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.state = state
        self.leading = None
        self.proposed_isr = None

    def stop(self) -> None:
        """This broker no longer hosts the partition (deleted, or moved off it): OFFLINE, so an
        acks=all write still waiting on it is answered now (NOT_LEADER_OR_FOLLOWER: the
        producer finds the partition's new home or learns it is gone), not at its timeout."""
        self.become_follower(-1, -1, None)

    def state_changed(self, state: PartitionState | None) -> None:
        """The metadata log changed the partition (its ISR, its partition epoch). A follower that
        left the ISR counts again only after a fetch made since (the leader forgets its
        progress); a proposal made at another partition epoch was committed (the ISR now says
        so) or never will be (the controller checks the partition epoch). The caller then
        advances the high watermark: a smaller ISR may let it move. A replica moved off the
        partition is forgotten altogether: if a reassignment brings it back, its log there
        starts empty, and progress its earlier log made must not propose it for the ISR."""
        left_isr = set(self.isr)
        left_replicas = set(() if self.state is None else self.state.replicas)
        self.state = state
        left_isr.difference_update(self.isr)
        left_replicas.difference_update(() if state is None else state.replicas)
        proposed = self.proposed_isr
        if proposed is not None and (
            state is None or state.partition_epoch != proposed.partition_epoch
        ):
            self.proposed_isr = None
        if self.leading is not None:
            for replica in left_isr:
                progress = self.leading.followers.get(replica)
                if progress is not None:
                    progress.log_end_offset = -1
            for replica in left_replicas:
                self.leading.followers.pop(replica, None)

    # --- the high watermark --------------------------------------------------------------------

    def follower_fetched(
        self,
        replica_id: int,
        fetch_offset: int,
        log_end_offset: int,
        now_ms: int,
        log_start_offset: int = -1,
        previous_fetch_ms: int = -1,
        broker_epoch: int = -1,
    ) -> bool:
        """Leader: a follower fetched from `fetch_offset`; True when its reported log start
        moved (the low watermark may have). Nothing while not leading. `previous_fetch_ms`:
        the follower's fetch from this broker before this one (of any partition);
        `broker_epoch`: its registration in this broker's metadata (replication.py)."""
        if self.leading is None:
            return False
        return self.leading.on_follower_fetch(
            replica_id,
            fetch_offset,
            log_end_offset,
            now_ms,
            log_start_offset,
            previous_fetch_ms,
            broker_epoch,
        )

    def advance_high_watermark(self, log_end_offset: int, min_insync_replicas: int) -> bool:
        """Leader: move the high watermark up to the maximal ISR's smallest log end; True if it
        moved. It stands still while the committed ISR is below `min_insync_replicas`."""
        if self.leading is None or self.state is None:
            return False
        if len(self.state.isr) < min_insync_replicas:  # the committed ISR, not the maximal
            return False
        candidate = self.leading.smallest_log_end(log_end_offset, self.maximal_isr)
        if candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        return True

    def take_leader_high_watermark(
        self, leader_high_watermark: int, log_start_offset: int, log_end_offset: int
    ) -> bool:
        """Follower: the leader's high watermark, capped by this replica's own log; True if it
        moved."""
        return self._set(
            high_watermark_within(leader_high_watermark, log_start_offset, log_end_offset)
        )

    def log_changed(self, log_start_offset: int, log_end_offset: int) -> bool:
        """The log was truncated or started over: the high watermark is kept within it; True if
        it moved."""
        return self._set(
            high_watermark_within(self.high_watermark, log_start_offset, log_end_offset)
        )

    def low_watermark(self, log_start_offset: int) -> int:
        """Leader: the smallest log start offset over the ISR (-1 while not leading, or until
        every ISR follower has reported one)."""
        if self.leading is None:
            return -1
        return self.leading.low_watermark(log_start_offset, self.isr)

    def _set(self, high_watermark: int) -> bool:
        moved = high_watermark != self.high_watermark
        self.high_watermark = high_watermark
        return moved

    # --- ISR proposals -------------------------------------------------------------------------

    def isr_to_propose(
        self,
        *,
        eligible: set[int],
        now_ms: int,
        lag_max_ms: int,
        log_end_offset: int,
        replica_fetch_ms: Mapping[int, int],
        broker_epochs: Mapping[int, int] | None = None,
    ) -> tuple[int, ...] | None:
        """Leader: the ISR to ask the controller for, or None (right as it is, not leading, or
        an accepted change not yet in the metadata log). An expansion whose request failed is
        asked for again as it was, until settled: the high watermark waits for it meanwhile."""
        state = self.state
        if self.leading is None or state is None:
            return None
        if state.partition_epoch < self.awaited_partition_epoch:
            return None
        proposed = self.proposed_isr
        if proposed is not None and set(proposed.isr) - set(state.isr):
            return proposed.isr
        return self.leading.proposed_isr(
            isr=state.isr,
            replicas=state.replicas,
            eligible=eligible,
            high_watermark=self.high_watermark,
            epoch_start_offset=self.epoch_start_offset,
            now_ms=now_ms,
            lag_max_ms=lag_max_ms,
            leader_end_offset=log_end_offset,
            replica_fetch_ms=replica_fetch_ms,
            broker_epochs=broker_epochs,
        )

    def isr_broker_epochs(self, isr: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """Leader: (follower, broker epoch its fetches were read under; -1: none) for `isr`'s
        followers, as a proposal of `isr` carries them to the controller (KIP-903). A proposal
        sent again carries those it was decided on: its joiners qualified by fetches under
        them, and one restarted since must not lend them its new registration."""
        proposed = self.proposed_isr
        if proposed is not None and proposed.isr == isr and proposed.broker_epochs:
            return proposed.broker_epochs
        if self.leading is None:
            return ()
        return self.leading.broker_epochs(r for r in isr if r != self.broker_id)

    def proposal_sent(
        self,
        isr: tuple[int, ...],
        partition_epoch: int,
        broker_epochs: tuple[tuple[int, int], ...] = (),
    ) -> None:
        """From now on the high watermark waits for `isr`'s added replicas too."""
        self.proposed_isr = ProposedIsr(isr, partition_epoch, broker_epochs)

    def proposal_accepted(self, partition_epoch: int) -> None:
        """The controller committed the change as `partition_epoch`: propose nothing more until
        the metadata log shows it. Only for a proposal this replica has in flight: an answer
        that arrives after the metadata log settled it, or after the topic was deleted and
        created again under the same name (a new replica, whose partition epochs start over),
        would otherwise stop every ISR change until the partition epoch caught up, which for
        a new topic's partition is never."""
        proposed = self.proposed_isr
        if proposed is not None and partition_epoch > proposed.partition_epoch:
            self.awaited_partition_epoch = partition_epoch

    def proposal_refused(self, partition_epoch: int) -> None:
        """Refused at the partition epoch it was decided from: it is never committed."""
        if self.proposed_isr is not None and partition_epoch == self.proposed_isr.partition_epoch:
            self.proposed_isr = None

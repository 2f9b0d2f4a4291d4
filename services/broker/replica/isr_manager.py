"""The leader's ISR upkeep: propose shrinking and expanding the ISR to the controller.

The broker asks the partitions it leads whether their ISR should change (replication.py
decides: lagging followers out, caught-up ones in): those a follower outside the ISR just
fetched, at once, and all of them every replica.lag.time.max.ms / 2 (see run_isr_manager). The
changes one pass decides are proposed together with AlterPartition (KIP-497: many partitions
per request, in chunks of `limits.alter_partition_items_max`, each request one metadata batch
on the controller), each carrying the leader epoch and partition epoch it was decided from and
every member's broker epoch as this leader saw it fetch (KIP-903), and the request the broker
epoch. The controller refuses a joiner whose registration is not the one it fetched under
(INELIGIBLE_REPLICA): it restarted, maybe losing what it had fetched, and this broker's
metadata did not show it yet. That refusal is handled like any other (below): once the metadata
shows the new registration, the joiner is proposed only on fetches read under it. A change
becomes true only when the controller commits it and the metadata log brings it back. Until
then the high watermark waits for the larger of the two ISRs (Kafka's maximal ISR,
`PartitionReplica.maximal_isr`): a shrink lowers the bar only once committed, and an expansion
raises it from the moment it is proposed — the controller may commit it and elect the added
replica before this broker hears of it, so a record acknowledged in between must already be
there (the replication simulation found that window). A proposal is settled by the metadata log
(the partition epoch moved: committed, or never to be) or by a refusal from the controller at
the same partition epoch; one whose request failed is sent again (an expansion as it was,
broker epochs included, until settled). At most one AlterPartition is in flight (as Kafka's
AlterPartitionManager): passes decide nothing while it is, and the first pass after it decides
everything that queued up meanwhile, so thousands of changes after a restart cost a few
requests rather than one Raft commit each. A partition whose proposal was refused, or whose
request failed, is asked about again after a growing backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.services.broker.broker_gauges import isr_change_counts
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.runtime.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.v1 import controller_pb2

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.25
# After a failed or refused proposal, the partition is asked about again only after this long
# (doubling up to the maximum), so an unavailable controller is not hammered.
RETRY_BACKOFF_S = 0.5
RETRY_BACKOFF_MAX_S = 8.0

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class Proposal:
    """One partition's ISR change, with the epochs it was decided from."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    # The committed ISR it was decided from: what the shrink and expand counters compare with.
    previous_isr: tuple[int, ...] = ()
    # (follower, broker epoch its fetches were read under; -1: unknown) for the followers of
    # `isr`: the controller refuses a joiner whose epoch is not its current one (KIP-903).
    broker_epochs: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


def alter_partition_requests(
    broker_id: int,
    broker_epoch: int,
    proposals: Sequence[Proposal],
    items_max: int = limits.alter_partition_items_max,
) -> list[controller_pb2.AlterPartitionRequest]:
    """The requests carrying `proposals`, in order, at most `items_max` each (the controller
    refuses larger ones whole); none for none. Each proposal names every member's broker epoch
    (KIP-903): the followers' as their fetches were read, this broker's own `broker_epoch`."""
    assert items_max > 0
    requests = []
    for first in range(0, len(proposals), items_max):
        request = controller_pb2.AlterPartitionRequest(
            broker_id=broker_id, broker_epoch=broker_epoch
        )
        request.partitions.extend(
            controller_pb2.AlterPartitionRequest.PartitionIsr(
                topic=p.topic,
                partition=p.partition,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                new_isr=p.isr,
                new_isr_with_epochs=_isr_with_epochs(p, broker_id, broker_epoch),
            )
            for p in proposals[first : first + items_max]
        )
        requests.append(request)
    return requests


def _isr_with_epochs(
    proposal: Proposal, broker_id: int, broker_epoch: int
) -> list[controller_pb2.AlterPartitionRequest.BrokerState]:
    epochs = dict(proposal.broker_epochs) | {broker_id: broker_epoch}
    return [
        controller_pb2.AlterPartitionRequest.BrokerState(
            broker_id=replica, broker_epoch=epochs.get(replica, -1)
        )
        for replica in proposal.isr
    ]


def proposal_requests(
    host: PartitionHost, broker_epoch: int, decided: Sequence[Proposal]
) -> list[controller_pb2.AlterPartitionRequest]:
    """The AlterPartition requests for `decided`; from now on each partition's high watermark
    waits for its proposed ISR too, until the proposal is settled (module doc)."""
    for proposal in decided:
        hosted = host.partitions.get(proposal.key)
        if hosted is not None:
            hosted.replica.proposal_sent(
                proposal.isr, proposal.partition_epoch, proposal.broker_epochs
            )
    return alter_partition_requests(host.broker_id, broker_epoch, decided)


async def run_isr_manager(
    host: PartitionHost,
    channel: ControllerChannel,
    broker_epoch: Callable[[], int],
    stop: asyncio.Event,
    *,
    lag_max_ms: int,
) -> None:
    """Propose ISR changes for the partitions this broker leads, until `stop` is set.

    Which partitions are looked at: every CHECK_INTERVAL_S, those a follower outside the ISR
    fetched (`host.isr_candidates`, filled by fetch.py: a candidate to rejoin) and those due a
    retry; every lag_max_ms / 2 (Kafka's ISR expiration period), every partition this broker
    leads, for followers that stopped catching up. An idle broker looks at nothing in between.
    While a request is in flight nothing is taken: candidates and retries wait for the pass
    after it, which then decides them all from fresher state and sends them together."""
    proposals = _Proposals(host, channel, broker_epoch)
    sweep_interval_s = max(CHECK_INTERVAL_S, lag_max_ms / 2000)
    last_sweep = time.monotonic()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), CHECK_INTERVAL_S)
            break
        except TimeoutError:
            pass
        if proposals.busy:
            continue
        keys = host.isr_candidates
        host.isr_candidates = set()
        keys.update(proposals.due_retries())
        if time.monotonic() - last_sweep >= sweep_interval_s:
            last_sweep = time.monotonic()
            keys.update(key for key, hosted in host.partitions.items() if hosted.is_leader)
        decided = decide_proposals(
            host, keys, now_ms=int(time.time() * 1000), lag_max_ms=lag_max_ms
        )
        if decided:
            proposals.start(decided)
    proposals.cancel()


def decide_proposals(
    host: PartitionHost, keys: set[PartitionKey], *, now_ms: int, lag_max_ms: int
) -> list[Proposal]:
    """The ISR changes to propose for these partitions, in a stable order."""
    eligible = {b for b, reg in host.image.brokers.items() if not reg.fenced}
    broker_epochs = {b: reg.broker_epoch for b, reg in host.image.brokers.items()}
    decided = []
    for key in sorted(keys):
        hosted = host.partitions.get(key)
        if hosted is None or hosted.log.log_end_unknown:
            # A leader whose log end is unknown refuses its followers' fetches (PartitionHost
            # .leader): their silence is not lag, and the ISR stays for the controller to pick
            # the next leader from.
            continue
        isr = hosted.replica.isr_to_propose(
            eligible=eligible,
            now_ms=now_ms,
            lag_max_ms=lag_max_ms,
            log_end_offset=hosted.log.log_end_offset,
            replica_fetch_ms=host.replica_fetch_ms,
            broker_epochs=broker_epochs,
        )
        if isr is None or hosted.state is None:
            continue
        decided.append(
            Proposal(
                topic=hosted.topic,
                partition=hosted.partition,
                leader_epoch=hosted.leader_epoch,
                partition_epoch=hosted.state.partition_epoch,
                isr=isr,
                previous_isr=hosted.state.isr,
                broker_epochs=hosted.replica.isr_broker_epochs(isr),
            )
        )
    return decided


class _Proposals:
    """The one AlterPartition exchange in flight, and the partitions waiting to retry one."""

    def __init__(
        self, host: PartitionHost, channel: ControllerChannel, broker_epoch: Callable[[], int]
    ) -> None:
        self.host = host
        self.channel = channel
        self.broker_epoch = broker_epoch
        self._task: asyncio.Task[None] | None = None
        self._retry_at: dict[PartitionKey, float] = {}
        self._backoff_s: dict[PartitionKey, float] = {}
        # The hosted partition each backoff is for: once the host no longer holds it (deleted,
        # or moved off this broker; a topic created again under the name is another), its
        # entries go, so a new partition under the same key starts without a backoff.
        self._backing_off: dict[PartitionKey, object] = {}
        # (shrinks, expands) of each proposal in flight, counted once the controller accepts it.
        self._isr_changes: dict[PartitionKey, tuple[int, int]] = {}

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, decided: list[Proposal]) -> None:
        assert not self.busy, "at most one AlterPartition in flight"
        requests = proposal_requests(self.host, self.broker_epoch(), decided)
        self._isr_changes = {p.key: isr_change_counts(p.previous_isr, p.isr) for p in decided}
        self._task = asyncio.create_task(self._send(requests))

    async def _send(self, requests: list[controller_pb2.AlterPartitionRequest]) -> None:
        """Send the chunks one after another; every partition ends accepted or backed off."""
        for index, request in enumerate(requests):
            try:
                accepted, refused = await _propose(self.host, self.channel, request)
            except asyncio.CancelledError:
                for unsent in requests[index:]:
                    self._retry_later(_keys(unsent))
                raise
            except Exception:
                log.exception("AlterPartition exchange failed")
                for unsent in requests[index:]:
                    self._retry_later(_keys(unsent))
                return
            self._settled(accepted)
            self._retry_later(refused)

    def _settled(self, keys: list[PartitionKey]) -> None:
        for key in keys:
            self._forget(key)
            shrinks, expands = self._isr_changes.get(key, (0, 0))
            self.host.metrics.isr_changed(shrinks, expands)

    def _retry_later(self, keys: list[PartitionKey]) -> None:
        now = time.monotonic()
        for key in keys:
            hosted = self.host.partitions.get(key)
            if hosted is None or self._backing_off.get(key, hosted) is not hosted:
                self._forget(key)  # gone, or another partition now: its backoff starts over
            if hosted is None:
                continue
            backoff = min(self._backoff_s.get(key, RETRY_BACKOFF_S / 2) * 2, RETRY_BACKOFF_MAX_S)
            self._backoff_s[key] = backoff
            self._retry_at[key] = now + backoff
            self._backing_off[key] = hosted

    def _forget(self, key: PartitionKey) -> None:
        self._backoff_s.pop(key, None)
        self._retry_at.pop(key, None)
        self._backing_off.pop(key, None)

    def due_retries(self) -> list[PartitionKey]:
        """The partitions whose retry is due; the backoffs of partitions gone are dropped."""
        for key, hosted in list(self._backing_off.items()):
            if self.host.partitions.get(key) is not hosted:
                self._forget(key)
        now = time.monotonic()
        due = [key for key, at in self._retry_at.items() if at <= now]
        for key in due:
            del self._retry_at[key]
        return due

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()


def _keys(request: controller_pb2.AlterPartitionRequest) -> list[PartitionKey]:
    return [(item.topic, item.partition) for item in request.partitions]


async def _propose(
    host: PartitionHost, channel: ControllerChannel, request: controller_pb2.AlterPartitionRequest
) -> tuple[list[PartitionKey], list[PartitionKey]]:
    """Ask the controller for these ISR changes: the partitions accepted and those refused (all
    of them when the request itself failed; see `settle_proposals`)."""
    keys = _keys(request)
    log.info("proposing ISR changes", extra={"partitions": len(keys)})
    try:
        response = await channel.write("AlterPartition", request)
    except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
        log.warning("AlterPartition of %d partitions failed: %s", len(keys), error)
        return [], keys
    return settle_proposals(host, keys, response)


def settle_proposals(
    host: PartitionHost, keys: list[PartitionKey], response: controller_pb2.AlterPartitionResponse
) -> tuple[list[PartitionKey], list[PartitionKey]]:
    """The controller's answer to an AlterPartition carrying `keys`: the partitions accepted
    (each now waits for its new partition epoch in the metadata log before it is proposed
    again) and those refused or unanswered (to retry)."""
    accepted: list[PartitionKey] = []
    refused = keys[len(response.partitions) :]  # unanswered: retry them
    for key, result in zip(keys, response.partitions, strict=False):
        hosted = host.partitions.get(key)
        if result.error_code == ErrorCode.NONE and (result.topic, result.partition) == key:
            if hosted is not None:
                hosted.replica.proposal_accepted(result.partition_epoch)
            accepted.append(key)
            continue
        refused.append(key)
        if hosted is not None:
            hosted.replica.proposal_refused(result.partition_epoch)
        log.warning(
            "AlterPartition refused",
            extra={
                "partition": f"{key[0]}-{key[1]}",
                "error": ErrorCode(result.error_code).name,
                "error_message": result.error_message,
            },
        )
    return accepted, refused

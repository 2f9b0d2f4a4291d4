"""The leader's ISR upkeep: propose shrinking and expanding the ISR to the controller.

The broker asks the partitions it leads whether their ISR should change (replication.py
decides: lagging followers out, caught-up ones in): those a follower outside the ISR just
fetched, at once, and all of them every replica.lag.time.max.ms / 2 (see run_isr_manager). A
change is proposed with AlterPartition, carrying the broker epoch, leader epoch and partition
epoch it was decided from; it becomes true only when the controller commits it and the metadata
log brings it back — the leader keeps using the committed ISR until then, which is the safe side
for both directions (a shrink lowers the bar only once committed; an expansion raises it only
once committed). At most PROPOSALS_IN_FLIGHT_MAX are in flight; a failed one is retried after a
growing backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import grpc

from samsa.common.errors import ErrorCode
from samsa.services.broker.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.services.broker.partition_host import HostedPartition, PartitionHost
from samsa.v1 import controller_pb2

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.25
# AlterPartition requests in flight at once: after a restart thousands of partitions may want
# their ISR changed; the controller takes them a few at a time rather than all in one storm.
PROPOSALS_IN_FLIGHT_MAX = 16
# After a failed or refused proposal, the partition is asked about again only after this long
# (doubling up to the maximum), so an unavailable controller is not hammered.
RETRY_BACKOFF_S = 0.5
RETRY_BACKOFF_MAX_S = 8.0


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
    leads, for followers that stopped catching up. An idle broker looks at nothing in between."""
    proposals = _Proposals(channel, broker_epoch)
    sweep_interval_s = max(CHECK_INTERVAL_S, lag_max_ms / 2000)
    last_sweep = time.monotonic()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), CHECK_INTERVAL_S)
            break
        except TimeoutError:
            pass
        keys = host.isr_candidates
        host.isr_candidates = set()
        keys.update(proposals.due_retries())
        if time.monotonic() - last_sweep >= sweep_interval_s:
            last_sweep = time.monotonic()
            keys.update(key for key, hosted in host.partitions.items() if hosted.is_leader)
        now_ms = int(time.time() * 1000)
        eligible = {b for b, reg in host.image.brokers.items() if not reg.fenced}
        for key in keys:
            hosted = host.partitions.get(key)
            if hosted is None or key in proposals.in_flight:
                continue
            proposal = _proposal(host, hosted, eligible, now_ms, lag_max_ms)
            if proposal is None:
                continue
            if len(proposals.in_flight) >= PROPOSALS_IN_FLIGHT_MAX:
                host.isr_candidates.add(key)  # next pass
                continue
            proposals.start(hosted, proposal)
    proposals.cancel()


def _proposal(
    host: PartitionHost,
    hosted: HostedPartition,
    eligible: set[int],
    now_ms: int,
    lag_max_ms: int,
) -> tuple[int, ...] | None:
    state = hosted.state
    if (
        not hosted.is_leader
        or hosted.replication is None
        or state is None
        or state.partition_epoch < hosted.awaited_partition_epoch
    ):
        return None
    return hosted.replication.proposed_isr(
        isr=state.isr,
        replicas=state.replicas,
        eligible=eligible,
        epoch_start_offset=hosted.epoch_start_offset,
        now_ms=now_ms,
        lag_max_ms=lag_max_ms,
        leader_end_offset=hosted.log.log_end_offset,
        replica_fetch_ms=host.replica_fetch_ms,
    )


class _Proposals:
    """AlterPartition requests in flight, and the partitions waiting to retry one."""

    def __init__(self, channel: ControllerChannel, broker_epoch: Callable[[], int]) -> None:
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.in_flight: dict[tuple[str, int], asyncio.Task[bool]] = {}
        self._retry_at: dict[tuple[str, int], float] = {}
        self._backoff_s: dict[tuple[str, int], float] = {}

    def start(self, hosted: HostedPartition, isr: tuple[int, ...]) -> None:
        key = (hosted.topic, hosted.partition)
        task = asyncio.create_task(_propose(hosted, isr, self.channel, self.broker_epoch()))
        self.in_flight[key] = task
        task.add_done_callback(lambda done: self._finished(key, done))

    def _finished(self, key: tuple[str, int], task: asyncio.Task[bool]) -> None:
        self.in_flight.pop(key, None)
        if task.cancelled() or task.exception() is not None or not task.result():
            backoff = min(self._backoff_s.get(key, RETRY_BACKOFF_S / 2) * 2, RETRY_BACKOFF_MAX_S)
            self._backoff_s[key] = backoff
            self._retry_at[key] = time.monotonic() + backoff
        else:
            self._backoff_s.pop(key, None)
            self._retry_at.pop(key, None)

    def due_retries(self) -> list[tuple[str, int]]:
        now = time.monotonic()
        due = [key for key, at in self._retry_at.items() if at <= now]
        for key in due:
            del self._retry_at[key]
        return due

    def cancel(self) -> None:
        for task in self.in_flight.values():
            task.cancel()


async def _propose(
    hosted: HostedPartition, isr: tuple[int, ...], channel: ControllerChannel, broker_epoch: int
) -> bool:
    """Ask the controller for the ISR change; True when it was accepted."""
    key = (hosted.topic, hosted.partition)
    state = hosted.state
    assert state is not None
    request = controller_pb2.AlterPartitionRequest(
        broker_id=hosted.leader_id,
        broker_epoch=broker_epoch,
        topic=hosted.topic,
        partition=hosted.partition,
        leader_epoch=hosted.leader_epoch,
        partition_epoch=state.partition_epoch,
        new_isr=isr,
    )
    log.info(
        "proposing ISR change",
        extra={"partition": f"{key[0]}-{key[1]}", "from": list(state.isr), "to": list(isr)},
    )
    try:
        response = await channel.write("AlterPartition", request)
    except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
        log.warning("AlterPartition failed: %s", error)
        return False
    if response.error_code == ErrorCode.NONE:
        hosted.awaited_partition_epoch = response.partition_epoch
        return True
    log.warning(
        "AlterPartition refused",
        extra={
            "partition": f"{key[0]}-{key[1]}",
            "error": ErrorCode(response.error_code).name,
            "error_message": response.error_message,
        },
    )
    return False

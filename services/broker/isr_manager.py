"""The leader's ISR upkeep: propose shrinking and expanding the ISR to the controller.

Every `CHECK_INTERVAL_S` the broker asks each partition it leads whether its ISR should change
(replication.py decides: lagging followers out, caught-up ones in). A change is proposed with
AlterPartition, carrying the broker epoch, leader epoch and partition epoch it was decided from;
it becomes true only when the controller commits it and the metadata log brings it back — the
leader keeps using the committed ISR until then, which is the safe side for both directions
(a shrink lowers the bar only once committed; an expansion raises it only once committed).
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


async def run_isr_manager(
    host: PartitionHost,
    channel: ControllerChannel,
    broker_epoch: Callable[[], int],
    stop: asyncio.Event,
    *,
    lag_max_ms: int,
) -> None:
    """Propose ISR changes for the partitions this broker leads, until `stop` is set."""
    proposing: set[tuple[str, int]] = set()
    tasks: set[asyncio.Task[None]] = set()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), CHECK_INTERVAL_S)
            break
        except TimeoutError:
            pass
        now_ms = int(time.time() * 1000)
        eligible = {b for b, reg in host.image.brokers.items() if not reg.fenced}
        for key, hosted in list(host.partitions.items()):
            state = hosted.state
            if (
                not hosted.is_leader
                or hosted.replication is None
                or state is None
                or key in proposing
                or state.partition_epoch < hosted.awaited_partition_epoch
            ):
                continue
            proposal = hosted.replication.proposed_isr(
                isr=state.isr,
                replicas=state.replicas,
                eligible=eligible,
                epoch_start_offset=hosted.epoch_start_offset,
                now_ms=now_ms,
                lag_max_ms=lag_max_ms,
            )
            if proposal is None:
                continue
            proposing.add(key)
            task = asyncio.create_task(
                _propose(hosted, proposal, channel, broker_epoch(), proposing)
            )
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    for task in tasks:
        task.cancel()


async def _propose(
    hosted: HostedPartition,
    isr: tuple[int, ...],
    channel: ControllerChannel,
    broker_epoch: int,
    proposing: set[tuple[str, int]],
) -> None:
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
        return
    finally:
        proposing.discard(key)
    if response.error_code == ErrorCode.NONE:
        hosted.awaited_partition_epoch = response.partition_epoch
    else:
        log.warning(
            "AlterPartition refused",
            extra={
                "partition": f"{key[0]}-{key[1]}",
                "error": ErrorCode(response.error_code).name,
                "error_message": response.error_message,
            },
        )

"""Followers: fetch from each leader with the same Fetch RPC consumers use, and append.

One loop per leader broker this broker follows partitions of. Each request names, per partition,
the follower's log end offset (which is how the leader learns its progress), the leader epoch it
believes current, and the epoch of its last batch (KIP-320): when the leader's log disagrees with
that epoch, the answer carries `diverging_epoch` and the follower truncates to its end offset —
never blindly to its high watermark (KIP-101) — before fetching again. What comes back is appended
as the leader assigned it (`append_as_follower`: offsets and epochs kept), and the follower's high
watermark becomes min(leader's, own log end).

A fetch with a replica_id moves the leader's high watermark, so each one carries a fresh
membership proof signed as this broker (`MemberSigner`); a leader refuses it otherwise
(PERMISSION_DENIED), and this loop logs that and backs off like any other failed fetch.
"""

from __future__ import annotations

import asyncio
import logging
import time

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode, SamsaError
from samsa.services.broker.partition_host import HostedPartition, PartitionHost
from samsa.services.broker.replication import follower_high_watermark
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.membership import method_path
from samsa.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500  # Kafka's replica.fetch.wait.max.ms
FETCH_PARTITION_BYTES = 1024 * 1024  # Kafka's replica.fetch.max.bytes
FETCH_RESPONSE_BYTES = 16 * 1024 * 1024  # Kafka's replica.fetch.response.max.bytes (10 MiB)
ERROR_BACKOFF_S = 0.1  # Kafka's replica.fetch.backoff.ms is 1 s; a local cluster wants speed
# A refused membership proof is a configuration error (another secret, a clock far off): log it
# once a second rather than ten times.
REFUSED_BACKOFF_S = 1.0
FETCH_METHOD = method_path(
    broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name, "Fetch"
)


class ReplicaFetchers:
    """The fetch loops of one broker, one per leader it follows partitions of."""

    def __init__(self, host: PartitionHost, broker_id: int, signer: MemberSigner) -> None:
        assert signer.member_id == broker_id, "replica fetches are signed as this broker"
        self.host = host
        self.broker_id = broker_id
        self.signer = signer
        self._loops: dict[int, asyncio.Task[None]] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}

    def reconcile(self) -> None:
        """Start a loop for every leader we now follow, stop those we no longer need."""
        leaders = {
            hosted.leader_id
            for hosted in self.host.partitions.values()
            if not hosted.is_leader and hosted.leader_id >= 0 and hosted.leader_id != self.broker_id
        }
        for leader_id in leaders - self._loops.keys():
            self._loops[leader_id] = asyncio.get_running_loop().create_task(
                self._run(leader_id), name=f"replica-fetcher-{leader_id}"
            )
        for leader_id in self._loops.keys() - leaders:
            self._loops.pop(leader_id).cancel()

    async def close(self) -> None:
        for task in self._loops.values():
            task.cancel()
        await asyncio.gather(*self._loops.values(), return_exceptions=True)
        self._loops.clear()
        await asyncio.gather(*(channel.close() for channel in self._channels.values()))

    def _followed(self, leader_id: int) -> list[HostedPartition]:
        return [
            hosted
            for hosted in self.host.partitions.values()
            if not hosted.is_leader
            and hosted.leader_id == leader_id
            and hosted.corrupt_from is None  # no progress reports until truncated (scrubber)
        ]

    def _stub(self, leader_id: int) -> broker_pb2_grpc.BrokerServiceStub | None:
        broker = self.host.image.brokers.get(leader_id)
        if broker is None:
            return None
        channel = self._channels.get(broker.endpoint)
        if channel is None:
            options = [
                ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
                ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
            ]
            channel = self._channels[broker.endpoint] = grpc.aio.insecure_channel(
                broker.endpoint, options=options
            )
        return broker_pb2_grpc.BrokerServiceStub(channel)

    async def _run(self, leader_id: int) -> None:
        while True:
            partitions = self._followed(leader_id)
            stub = self._stub(leader_id)
            if not partitions or stub is None:
                await asyncio.sleep(ERROR_BACKOFF_S)
                continue
            offsets = {(h.topic, h.partition): h.log.log_end_offset for h in partitions}
            request = self._request(partitions)
            try:
                response = await stub.Fetch(
                    request,
                    timeout=FETCH_MAX_WAIT_MS / 1000 + 10,
                    metadata=self.signer.metadata(FETCH_METHOD),
                )
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.PERMISSION_DENIED:
                    log.error("replica fetch from %d refused: %s", leader_id, error.details())
                    await asyncio.sleep(REFUSED_BACKOFF_S)
                    continue
                log.debug("replica fetch from %d failed: %s", leader_id, error.code())
                await asyncio.sleep(ERROR_BACKOFF_S)
                continue
            if not self._apply(leader_id, response, offsets):
                await asyncio.sleep(ERROR_BACKOFF_S)

    def _request(self, partitions: list[HostedPartition]) -> broker_pb2.FetchRequest:
        by_topic: dict[str, list[broker_pb2.FetchRequest.PartitionData]] = {}
        for hosted in partitions:
            wanted = broker_pb2.FetchRequest.PartitionData(
                partition=hosted.partition,
                fetch_offset=hosted.log.log_end_offset,
                current_leader_epoch=hosted.leader_epoch,
                partition_max_bytes=FETCH_PARTITION_BYTES,
            )
            if hosted.log.latest_epoch >= 0:
                wanted.last_fetched_epoch = hosted.log.latest_epoch
            by_topic.setdefault(hosted.topic, []).append(wanted)
        return broker_pb2.FetchRequest(
            replica_id=self.broker_id,
            max_wait_ms=FETCH_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=FETCH_RESPONSE_BYTES,
            topics=[
                broker_pb2.FetchRequest.TopicData(name=topic, partitions=wanted)
                for topic, wanted in by_topic.items()
            ],
        )

    def _apply(
        self,
        leader_id: int,
        response: broker_pb2.FetchResponse,
        offsets: dict[tuple[str, int], int],
    ) -> bool:
        """Store what the leader sent; False when every partition failed (back off)."""
        now_ms = int(time.time() * 1000)
        progressed = False
        for topic in response.topics:
            for result in topic.partitions:
                key = (topic.name, result.partition)
                hosted = self.host.get(*key)
                if (
                    hosted is None
                    or hosted.is_leader
                    or hosted.leader_id != leader_id
                    or hosted.log.log_end_offset != offsets.get(key)
                ):
                    continue  # the partition moved on while the fetch was out
                if self._apply_partition(hosted, result, now_ms):
                    progressed = True
        return progressed

    def _apply_partition(
        self, hosted: HostedPartition, result: FetchPartitionResult, now_ms: int
    ) -> bool:
        log_ = hosted.log
        where = f"{hosted.topic}-{hosted.partition}"
        if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if log_.log_end_offset < result.log_start_offset:
                log.warning("follower behind the leader's log start", extra={"partition": where})
                log_.truncate_fully_and_start_at(result.log_start_offset)
            else:
                log_.truncate_to(min(result.high_watermark, log_.log_end_offset))
            return True
        if result.error_code != ErrorCode.NONE:
            return False  # leadership changed: the metadata log will say where to go
        if result.HasField("diverging_epoch"):
            end = result.diverging_epoch.end_offset
            target = end if end >= 0 else min(hosted.high_watermark, log_.log_end_offset)
            log.warning(
                "follower log diverged from the leader's: truncating",
                extra={
                    "partition": where,
                    "epoch": result.diverging_epoch.leader_epoch,
                    "truncate_to": target,
                    "log_end_offset": log_.log_end_offset,
                },
            )
            log_.truncate_to(target)
            hosted.high_watermark = min(hosted.high_watermark, log_.log_end_offset)
            return True
        if result.records:
            try:
                log_.append_as_follower(result.records, now_ms=now_ms)
            except SamsaError as error:
                log.error("follower append failed", extra={"partition": where, "error": str(error)})
                return False
        hosted.high_watermark = follower_high_watermark(result.high_watermark, log_.log_end_offset)
        if result.records:
            hosted.notify_appended()
        return True


FetchPartitionResult = broker_pb2.FetchResponse.PartitionResponse

"""The broker's client quotas at its Produce and Fetch adapters: who the client is, how many
bytes its request counts, and the delay of a throttled answer (services/broker/quotas.py holds
the rules; this is its I/O side: the call metadata, the clock and the event loop's timers).

Hot path. `active()` is one attribute read and one truth test of the image's quota map, and is
all an adapter does while no quota is set anywhere: a unary call's client.id is read from its
metadata only when one is (a stream's once, as it opens). The bytes counted are those of the
non-internal topics: the coordinators' writes and reads of __consumer_offsets and
__transaction_state are exempt, and so are followers: the adapters never count their fetches.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from samsa.metadata.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.quotas import ClientQuotaTracker, client_id_from
from samsa.services.broker.requests.fetch_wire import FetchAnswer
from samsa.v1 import broker_pb2


class QuotaThrottle:
    """One broker's byte counts per client, over its PartitionHost's image."""

    def __init__(self, host: PartitionHost) -> None:
        self.host = host
        self.tracker = ClientQuotaTracker()

    def active(self) -> bool:
        """Some quota is set in the image: requests must be counted (never without a host:
        a servicer some tests build to answer refusals only)."""
        host = self.host
        return host is not None and bool(host.image.client_quotas)

    @staticmethod
    def client_id(context: grpc.aio.ServicerContext) -> str | None:
        """The client.id the call carries, or None (see quotas.client_id_from)."""
        return client_id_from(context.invocation_metadata())

    def produced(self, client_id: str | None, request: broker_pb2.ProduceRequest) -> int:
        """Count the request's batch bytes (appended); its throttle time in ms."""
        size = 0
        for topic in request.topics:
            if topic.name not in INTERNAL_TOPICS:
                for data in topic.partitions:
                    size += len(data.records) or (data.ByteSize() if data.typed_records else 0)
        return self._record(client_id, PRODUCER_BYTE_RATE, size)

    def fetched(self, client_id: str | None, answer: FetchAnswer) -> int:
        """Count the answer's record bytes; its throttle time in ms, also set in the answer."""
        size = sum(
            len(data) for key, data in answer.records.items() if key[0] not in INTERNAL_TOPICS
        )
        throttle_ms = self._record(client_id, CONSUMER_BYTE_RATE, size)
        answer.response.throttle_time_ms = throttle_ms
        return throttle_ms

    def _record(self, client_id: str | None, key: str, size: int) -> int:
        now_ms = int(time.monotonic() * 1000)
        return self.tracker.record(self.host.image.client_quotas, client_id, key, size, now_ms)


async def delay(throttle_ms: int) -> None:
    """Hold a throttled answer back on the event loop's timers (nothing else waits)."""
    if throttle_ms > 0:
        await asyncio.sleep(throttle_ms / 1000)

"""The broker's client quotas at its Produce and Fetch adapters: who the client is, how many
bytes its request counts, and the delay of a throttled answer (services/broker/quotas.py holds
the rules; this is its I/O side: the call's metadata and TLS session, the clock and the event
loop's timers).

Who the client is (`Identity`): its user, the name of its principal as the authorizer reads it
(its SASL user name; else the TLS client certificate's subject through
ssl.principal.mapping.rules; ANONYMOUS without one), and the client.id its call metadata
carries. A certificate no mapping rule fits counts as ANONYMOUS here: with the authorizer on,
such a call is refused before it gets here.

Hot path. `active()` is one attribute read and one truth test of the image's quota map, and is
all an adapter does while no quota is set anywhere: a unary call's identity is read only when
one is (a stream's once, as it opens). The bytes counted are those of the
non-internal topics: the coordinators' writes and reads of __consumer_offsets and
__transaction_state are exempt, and so are followers: the adapters never count their fetches.
"""

from __future__ import annotations

import asyncio
import time
from typing import NamedTuple

import grpc

from samsa.metadata.acls import ANONYMOUS
from samsa.metadata.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.metadata.principal_rules import USER_PREFIX, PrincipalRules
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.quotas import ClientQuotaTracker, client_id_from
from samsa.services.broker.requests.fetch_wire import FetchAnswer
from samsa.services.runtime.authorization import principal_of
from samsa.v1 import broker_pb2

_ANONYMOUS_USER = ANONYMOUS.removeprefix(USER_PREFIX)


class Identity(NamedTuple):
    """Whom a call's bytes count for: its user (a principal's name) and its client.id."""

    user: str
    client_id: str | None


class QuotaThrottle:
    """One broker's byte counts per client, over its PartitionHost's image."""

    def __init__(self, host: PartitionHost, rules: PrincipalRules | None = None) -> None:
        self.host = host
        self.rules = rules or PrincipalRules.parse("")
        self.tracker = ClientQuotaTracker()

    def active(self) -> bool:
        """Some quota is set in the image: requests must be counted (never without a host:
        a servicer some tests build to answer refusals only)."""
        host = self.host
        return host is not None and bool(host.image.client_quotas)

    def identity(self, context: grpc.aio.ServicerContext) -> Identity:
        """The call's user and client.id (None when it sends none: see quotas.client_id_from)."""
        try:
            user = principal_of(context, self.rules).removeprefix(USER_PREFIX)
        except ValueError:  # no mapping rule fits the certificate (see the module doc)
            user = _ANONYMOUS_USER
        return Identity(user, client_id_from(context.invocation_metadata()))

    def produced(self, identity: Identity, request: broker_pb2.ProduceRequest) -> int:
        """Count the request's batch bytes (appended); its throttle time in ms."""
        size = 0
        for topic in request.topics:
            if topic.name not in INTERNAL_TOPICS:
                for data in topic.partitions:
                    size += len(data.records) or (data.ByteSize() if data.typed_records else 0)
        return self._record(identity, PRODUCER_BYTE_RATE, size)

    def fetched(self, identity: Identity, answer: FetchAnswer) -> int:
        """Count the answer's record bytes; its throttle time in ms, also set in the answer."""
        size = sum(
            len(data) for key, data in answer.records.items() if key[0] not in INTERNAL_TOPICS
        )
        throttle_ms = self._record(identity, CONSUMER_BYTE_RATE, size)
        answer.response.throttle_time_ms = throttle_ms
        return throttle_ms

    def _record(self, identity: Identity, key: str, size: int) -> int:
        now_ms = int(time.monotonic() * 1000)
        quotas = self.host.image.client_quotas
        return self.tracker.record(quotas, identity.user, identity.client_id, key, size, now_ms)


async def delay(throttle_ms: int) -> None:
    """Hold a throttled answer back on the event loop's timers (nothing else waits)."""
    if throttle_ms > 0:
        await asyncio.sleep(throttle_ms / 1000)

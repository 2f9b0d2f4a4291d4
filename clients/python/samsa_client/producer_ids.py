"""The idempotent producer's identity, on the driver's loop: local epoch bumps and InitProducerId.

Theory of operation (KIP-98, KIP-360). When the accumulator reports `producer_id_required`,
nothing is in flight and the driver asks `next_identity()` for the (producer id, epoch) to
restart every partition's sequences with:
- the first time, InitProducerId on a known broker (the next one on each attempt), whose answer
  starts at epoch 0;
- afterwards the producer bumps its own epoch (`bumped_producer_epoch`): no broker is needed to
  reset sequences, and the broker takes a higher epoch of a known producer id as a fresh start;
- InitProducerId again only when the epoch would pass int16, or after INVALID_PRODUCER_EPOCH
  (`on_fenced`): a newer epoch of our id exists, and bumping ours may not pass it.
A failed call answers its error code: the driver retries a retriable one after retry.backoff.ms
(queued batches still expire at delivery.timeout.ms) and fails the batches on any other. A call
cut off (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, and INTERNAL or UNKNOWN from a broker killed
mid-call) is retriable; a broker without the RPC (gRPC UNIMPLEMENTED) answers
UNSUPPORTED_VERSION, a refused request INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import grpc

from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.errors import coded_message
from samsa.client.producer_sequences import bumped_producer_epoch
from samsa.client.refusals import authorization_error
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2, broker_pb2_grpc

# gRPC statuses after which another attempt may succeed.
RETRIABLE_STATUSES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
# InitProducerId asks again after these too: a broker killed mid-call ends it with INTERNAL
# ("Internal error from Core", as a produce stream sees it: produce_stream.py) or UNKNOWN, not
# with an answer. Asking again changes nothing at any broker.
INIT_RETRIABLE_STATUSES = RETRIABLE_STATUSES | {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
# A refusal of the request itself: asking again is refused again.
INIT_REFUSED_STATUSES = frozenset(
    {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
)


class ProducerIdentity(NamedTuple):
    error_code: ErrorCode  # NONE: producer_id and producer_epoch are the ones to use
    error_message: str
    producer_id: int
    producer_epoch: int


class ProducerIds:
    def __init__(
        self,
        metadata: ClusterMetadata,
        stub: Callable[[str], broker_pb2_grpc.BrokerServiceStub],
        request_timeout_s: float,
    ) -> None:
        self._metadata = metadata
        self._stub = stub
        self._request_timeout_s = request_timeout_s
        self._fenced = False
        self._attempts = 0

    def on_fenced(self) -> None:
        """A broker answered INVALID_PRODUCER_EPOCH: the next identity is a new producer id."""
        self._fenced = True

    async def next_identity(self, producer_id: int, producer_epoch: int) -> ProducerIdentity:
        """The identity to reset sequences with, after (producer_id, producer_epoch)."""
        bumped = None if self._fenced else bumped_producer_epoch(producer_id, producer_epoch)
        if bumped is not None:
            return ProducerIdentity(ErrorCode.NONE, "", producer_id, bumped)
        identity = await self._init_producer_id()
        if identity.error_code is ErrorCode.NONE:
            self._fenced = False
        return identity

    async def _init_producer_id(self) -> ProducerIdentity:
        """One InitProducerId on a known broker (the next one each time)."""
        endpoints = sorted(self._metadata.endpoints.values())
        if not endpoints:
            self._metadata.mark_stale()
            return ProducerIdentity(ErrorCode.NETWORK_EXCEPTION, "no broker known yet", -1, -1)
        endpoint = endpoints[self._attempts % len(endpoints)]
        self._attempts += 1
        try:
            response = await self._stub(endpoint).InitProducerId(
                broker_pb2.InitProducerIdRequest(), timeout=self._request_timeout_s
            )
        except grpc.RpcError as error:
            status = error.code()
            refused = authorization_error(error)
            if refused is not None:  # an ACL refusal: every broker refuses it the same
                code = refused.code
            elif status in INIT_RETRIABLE_STATUSES:
                code = ErrorCode.NETWORK_EXCEPTION
            elif status in INIT_REFUSED_STATUSES:
                code = ErrorCode.INVALID_REQUEST
            else:  # UNIMPLEMENTED above all: a broker without the call
                code = ErrorCode.UNSUPPORTED_VERSION
            return ProducerIdentity(
                code, f"{endpoint}: {error.code().name} {error.details()}", -1, -1
            )
        # A newer broker's code this client does not know: UNKNOWN_SERVER_ERROR, not retried.
        code, message = coded_message(response.error_code, response.error_message)
        return ProducerIdentity(
            code,
            message,
            response.producer_id,
            response.producer_epoch,
        )

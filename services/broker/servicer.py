"""The BrokerService gRPC adapter: request limits, then the produce/fetch/list-offsets cores, and
InitProducerId from the broker's producer id blocks (producer_ids.py).

A Fetch that claims a replica_id (a follower's) must carry the cluster's membership proof
(services/runtime/membership.py): without it a stranger could move the high watermark. So must a
Produce that writes an internal topic (`__consumer_offsets`): without it a stranger could forge
group state. Any member's proof is accepted there (coordinators sign as their coordinator id);
the check costs one HMAC, and only requests naming an internal topic pay it. A ProduceStream
writes internal topics when its call metadata carried such a proof, signed for ProduceStream and
checked once as the stream opens (produce_stream.py): coordinators write over one.
WriteTxnMarkers (txn_markers.py) always needs a member's proof: a forged marker would commit or
abort someone else's transaction. So does WriteTxnMarkersStream, checked once as it opens
(txn_markers_stream.py): coordinators write their markers over one.
DescribeLogDirs is a read open to any client, as DescribeProducers: it reads the disk's figures
(a statvfs, which a hung file system can stall) on a worker thread, never on the event loop, one
read at a time shared by the calls that arrive meanwhile."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import time
from contextlib import aclosing
from pathlib import Path

import grpc

from samsa.common import limits
from samsa.metadata.acls import Operation
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.replica_stream import serve_replica_fetch_stream
from samsa.services.broker.requests.answer_gate import AnswerGate
from samsa.services.broker.requests.delete_records import delete_records, timeout_refusal
from samsa.services.broker.requests.describe_log_dirs import (
    DiskSpace,
    ReplicaFigures,
    describe_log_dirs,
    page_limit,
)
from samsa.services.broker.requests.describe_producers import describe_producers
from samsa.services.broker.requests.fetch import fetch_answer
from samsa.services.broker.requests.fetch_session import EPOCH_MAX, FetchSessionCache
from samsa.services.broker.requests.fetch_stream import serve_fetch_stream
from samsa.services.broker.requests.fetch_wire import response_bytes
from samsa.services.broker.requests.list_offsets import list_offsets
from samsa.services.broker.requests.partition_refusals import per_partition
from samsa.services.broker.requests.produce_stream import (
    STREAM_INTERNAL_WRITE_REFUSAL,
    produce_once,
    serve_produce_stream,
)
from samsa.services.broker.requests.produce_wait import await_replication
from samsa.services.broker.requests.producer_ids import ProducerIdManager, init_producer_id
from samsa.services.broker.requests.quota_throttle import QuotaThrottle, delay
from samsa.services.broker.requests.request_checks import (
    fetch_refusal,
    log_dirs_refusal,
    partitions_refusal,
)
from samsa.services.broker.requests.txn_markers import markers_refusal, write_txn_markers
from samsa.services.broker.requests.txn_markers import timeout_s as txn_markers_timeout_s
from samsa.services.broker.requests.txn_markers_stream import serve_markers_stream
from samsa.services.broker.requests.txn_verification import TransactionVerifier
from samsa.services.runtime import member_auth, membership
from samsa.services.runtime.caller import topic_refusals
from samsa.services.runtime.membership import method_path
from samsa.services.runtime.stream_answers import Draining
from samsa.v1 import broker_pb2, broker_pb2_grpc

BROKER_SERVICE = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name
FETCH_METHOD = method_path(BROKER_SERVICE, "Fetch")
PRODUCE_METHOD = method_path(BROKER_SERVICE, "Produce")
PRODUCE_STREAM_METHOD = method_path(BROKER_SERVICE, "ProduceStream")
WRITE_TXN_MARKERS_METHOD = method_path(BROKER_SERVICE, "WriteTxnMarkers")
WRITE_TXN_MARKERS_STREAM_METHOD = method_path(BROKER_SERVICE, "WriteTxnMarkersStream")


async def _check_partitions(request, context: grpc.aio.ServicerContext) -> None:  # type: ignore[no-untyped-def]
    refusal = partitions_refusal(request)
    if refusal is not None:
        await context.abort(*refusal)


class BrokerServicer(broker_pb2_grpc.BrokerServiceServicer):
    """Serves Produce, Fetch (unary and streamed), ListOffsets, WriteTxnMarkers (unary and
    streamed), DescribeProducers and DeleteRecords for the partitions this broker leads,
    InitProducerId, and DescribeLogDirs for every partition it hosts."""

    def __init__(
        self,
        host: PartitionHost,
        *,
        member_key: bytes,
        producer_ids: ProducerIdManager,
        txn_verifier: TransactionVerifier | None = None,
        draining: Draining | None = None,
        answer_gate: AnswerGate | None = None,
        principal_rules: PrincipalRules | None = None,
    ) -> None:
        self.host = host
        # The bytes of consumers' fetch answers held at once (answer_budget.py); None: no bound.
        self.answer_gate = answer_gate
        # Set as the broker stops: its produce and marker streams then end (stream_answers.py).
        self.draining = draining
        self.txn_verifier = txn_verifier
        self.producer_ids = producer_ids
        self.member_key = member_key  # membership.derive_key(cluster secret): checks followers
        # Client quotas (quota_throttle.py): one check per request while none is set.
        self.quotas = QuotaThrottle(host, principal_rules)
        self.fetch_sessions = FetchSessionCache(new_id=lambda: secrets.randbelow(EPOCH_MAX) + 1)
        # DescribeLogDirs' read of the disk's figures in progress, shared by the calls meanwhile.
        self._disk_read: asyncio.Future[tuple[str, DiskSpace | str]] | None = None

    async def Produce(self, request, context):
        refusal = self._internal_write_refusal(request, context)
        response = await produce_once(
            self.host,
            request,
            context,
            internal_write_refusal=refusal,
            verifier=self.txn_verifier,
        )
        if self.quotas.active():
            throttle_ms = self.quotas.produced(self.quotas.identity(context), request)
            response.throttle_time_ms = throttle_ms
            await delay(throttle_ms)
        return response

    def _internal_write_refusal(
        self, request: broker_pb2.ProduceRequest, context: grpc.aio.ServicerContext
    ) -> str | None:
        """None when `request` may write internal topics (it names none, or its caller proved
        it is a member of the cluster); otherwise why not, for `produce`'s message."""
        if not any(topic.name in INTERNAL_TOPICS for topic in request.topics):
            return None
        return self._proof_refusal(context, PRODUCE_METHOD, "the request")

    def _proof_refusal(
        self, context: grpc.aio.ServicerContext, method: str, what: str
    ) -> str | None:
        """None when the call's metadata proves a member of the cluster calls `method`;
        otherwise why not (`what` names the call or stream in the message)."""
        error = membership.verify_any(
            self.member_key,
            member_auth.proof_in(context),
            method,
            int(time.time() * 1000),
        )
        if error is None:
            return None
        if error.missing:
            return f"{what} carries no {membership.METADATA_KEY} metadata"
        return f"its membership proof is refused ({error})"

    async def ProduceStream(self, request_iterator, context):
        # A coordinator's stream proves membership once, as it opens: it may write internal
        # topics for its lifetime. Other streams are refused those partitions.
        refusal: str | None = STREAM_INTERNAL_WRITE_REFUSAL
        if member_auth.proof_in(context) is not None:
            refusal = self._proof_refusal(context, PRODUCE_STREAM_METHOD, "the stream")
        async for answer in serve_produce_stream(
            self.host,
            request_iterator,
            context,
            self.txn_verifier,
            internal_write_refusal=refusal,
            draining=self.draining,
            quotas=self.quotas,
        ):
            yield answer

    async def Fetch(self, request, context):
        # A replica_id counts the fetch towards the ISR and the high watermark and reads past it:
        # only a member of the cluster may claim one. Consumers (unset or -1) stay open.
        follower = request.HasField("replica_id") and request.replica_id >= 0
        if follower:
            await member_auth.require_member(
                context,
                self.member_key,
                FETCH_METHOD,
                request.replica_id,
                f"Fetch with replica_id={request.replica_id}",
            )
        refusal = fetch_refusal(request)
        if refusal is not None:
            await context.abort(*refusal)
        gate = self.answer_gate
        # A consumer's topics it may not READ: TOPIC_AUTHORIZATION_FAILED per partition (ACLs).
        refused = None if follower else topic_refusals(Operation.READ)
        answer = await fetch_answer(self.host, request, self.fetch_sessions, gate, refused)
        if not follower and self.quotas.active():
            # Throttled: the answer waits holding its bytes, before its write deadline starts.
            try:
                await delay(self.quotas.fetched(self.quotas.identity(context), answer))
            except BaseException:  # the call ended meanwhile (cancelled): nothing to write
                if gate is not None:
                    gate.release(answer.held_bytes)
                raise
        if gate is not None:
            # Held until the call ends: gRPC has then written the answer (or dropped it, or
            # the gate's write deadline ended the call: answer_write_deadline.py).
            gate.release_when_written(answer.held_bytes, context)
        # Serialized here, records spliced in (fetch_wire.py): see add_broker_service.
        return response_bytes(answer)

    async def FetchStream(self, request_iterator, context):
        # Consumers' fetches on one stream: fetch_stream.py.
        stream = serve_fetch_stream(
            self.host, self.fetch_sessions, request_iterator, context, self.answer_gate, self.quotas
        )
        async with aclosing(stream):  # ended with this one: it releases the answer it held
            async for answer in stream:
                yield answer

    async def ReplicaFetchStream(self, request_iterator, context):
        # Followers' fetches on one stream, membership proved once: replica_stream.py.
        stream = serve_replica_fetch_stream(
            self.host, self.fetch_sessions, self.member_key, request_iterator, context
        )
        async for answer in stream:
            yield answer

    async def ListOffsets(self, request, context):
        await _check_partitions(request, context)
        # Each topic the caller may not DESCRIBE: TOPIC_AUTHORIZATION_FAILED per partition.
        names = self.host.image.topic_names.get
        return await per_partition(
            Operation.DESCRIBE, request, lambda allowed: list_offsets(self.host, allowed), names
        )

    async def InitProducerId(self, request, context):
        return await init_producer_id(self.producer_ids, request, context.time_remaining())

    async def DescribeProducers(self, request, context):
        await _check_partitions(request, context)
        now_ms = int(time.time() * 1000)
        return await per_partition(  # READ on each topic, per partition (partition_refusals.py)
            Operation.READ, request, lambda allowed: describe_producers(self.host, allowed, now_ms)
        )

    async def DeleteRecords(self, request, context):
        await _check_partitions(request, context)
        refusal = timeout_refusal(request.timeout_ms)
        if refusal is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, refusal)
        remaining = context.time_remaining()
        return await per_partition(  # DELETE on each topic, per partition (partition_refusals.py)
            Operation.DELETE, request, lambda allowed: delete_records(self.host, allowed, remaining)
        )

    async def DescribeLogDirs(self, request, context):
        refusal = log_dirs_refusal(request)
        if refusal is not None:
            await context.abort(*refusal)
        path, disk = await self._read_disk()
        limit = page_limit(request.partition_limit, limits.log_dirs_answer_partitions_max)
        hosted = self.host.partitions_by_topic
        return describe_log_dirs(request, hosted, self._replica_figures, path, disk, limit)

    async def _read_disk(self) -> tuple[str, DiskSpace | str]:
        """The data dir's path and disk space, read on a worker thread; one read at a time,
        shared by the calls that arrive meanwhile, so that a hung file system holds one thread
        of the loop's default executor (which the log cleaner uses too), not one per call."""
        if self._disk_read is None:
            read = asyncio.ensure_future(asyncio.to_thread(_disk_space, self.host.data_dir))
            read.add_done_callback(self._disk_read_done)
            self._disk_read = read
        return await asyncio.shield(self._disk_read)  # a caller gone does not cancel the read

    def _disk_read_done(self, _: asyncio.Future[tuple[str, DiskSpace | str]]) -> None:
        self._disk_read = None

    def _replica_figures(self, topic: str, partition: int) -> ReplicaFigures:
        hosted = self.host.partitions[(topic, partition)]
        return ReplicaFigures(
            hosted.log.size_bytes(), hosted.high_watermark, hosted.log.log_end_offset
        )

    async def _require_coordinator(
        self, context: grpc.aio.ServicerContext, method: str, name: str
    ) -> None:
        # A forged marker would commit or abort someone else's transaction: members only.
        error = membership.verify_any(
            self.member_key,
            member_auth.proof_in(context),
            method,
            int(time.time() * 1000),
        )
        if error is not None:
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{name} is for transaction coordinators: {error}",
            )

    async def WriteTxnMarkersStream(self, request_iterator, context):
        await self._require_coordinator(
            context, WRITE_TXN_MARKERS_STREAM_METHOD, "WriteTxnMarkersStream"
        )
        async for answer in serve_markers_stream(
            self.host, request_iterator, context, self.draining
        ):
            yield answer

    async def WriteTxnMarkers(self, request, context):
        await self._require_coordinator(context, WRITE_TXN_MARKERS_METHOD, "WriteTxnMarkers")
        refusal = markers_refusal(request)
        if refusal is not None:
            await context.abort(*refusal)
        response, waits = write_txn_markers(self.host, request, int(time.time() * 1000))
        if waits:
            await await_replication(waits, txn_markers_timeout_s(request))
        return response


def _disk_space(data_dir: Path) -> tuple[str, DiskSpace | str]:
    """The data dir's absolute path and its file system's total and usable bytes (what an
    unprivileged writer may use: statvfs's f_bavail, Kafka's usable space), or why not."""
    path = str(data_dir.absolute())
    try:
        usage = shutil.disk_usage(data_dir)
    except OSError as error:
        return path, f"cannot read the disk space of {path}: {error.strerror or error}"
    return path, DiskSpace(usage.total, usage.free)


# The methods whose answers the servicer returns or yields already serialized (fetch_wire.py).
PRESERIALIZED_ANSWERS = ("Fetch", "FetchStream", "ReplicaFetchStream")


class _HandlerCapture:
    """Stands in for a server to the generated `add_BrokerServiceServicer_to_server`, keeping
    the method handlers it would register."""

    handlers: dict[str, grpc.RpcMethodHandler]

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self.handlers = dict(handlers)


def add_broker_service(servicer: BrokerServicer, server: grpc.aio.Server) -> None:
    """Register BrokerService as the generated code would, except that the fetches send the
    bytes their handlers return or yield as they are (no response serializer)."""
    capture = _HandlerCapture()
    broker_pb2_grpc.add_BrokerServiceServicer_to_server(servicer, capture)
    handlers = capture.handlers
    for name in PRESERIALIZED_ANSWERS:
        handler = handlers[name]
        handlers[name] = handler._replace(response_serializer=None)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(BROKER_SERVICE, handlers),)
    )
    server.add_registered_method_handlers(BROKER_SERVICE, handlers)

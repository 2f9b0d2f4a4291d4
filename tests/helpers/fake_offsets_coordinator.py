"""A fake group coordinator on loopback gRPC that refuses OffsetCommit, OffsetFetch and
TxnOffsetCommit for their size as the real one does, with the real one's checks: the SDK tests of
how commits are split (Python and Node) run against it instead of a cluster, where creating
topics of thousands of partitions is slow.

The size checks are the coordinator's own functions (`servicer.partitions_problem`,
`group_offsets.commit_size_problem`, `transaction_stream.txn_offsets_refusal`), so the fake cannot
drift from it. The coordinator does not check a TxnOffsetCommit's bytes: it writes its records as
one transactional batch of __consumer_offsets, which the broker refuses (MESSAGE_TOO_LARGE) past
max.message.bytes, and answers every partition with that error; so does the fake. Anything else is
accepted: it answers FindCoordinator with itself, assigns a member every partition of `sizes` at
epoch 1, and keeps the offsets committed (plain and transactional alike).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from concurrent import futures
from contextlib import contextmanager

import grpc

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_offsets import commit_size_problem
from samsa.services.coordinator.servicer import partitions_problem
from samsa.services.coordinator.transaction_stream import txn_offsets_refusal
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg

TopicPartition = tuple[str, int]


class FakeOffsetsCoordinator(
    cg.CoordinatorLookupServiceServicer,
    cg.GroupCoordinatorServiceServicer,
    xg.TransactionCoordinatorServiceServicer,
):
    """See the module docstring. `requests` lists each OffsetCommit and TxnOffsetCommit as
    (method, its partitions in order), refused or not; `refusals` the refusals' messages."""

    def __init__(self, sizes: Mapping[str, int] | None = None) -> None:
        self.sizes = dict(sizes or {})
        self.endpoint = ""
        self.committed: dict[TopicPartition, int] = {}
        self.requests: list[tuple[str, list[TopicPartition]]] = []
        self.refusals: list[str] = []
        self._lock = threading.Lock()  # handlers run on the server's threads

    def FindCoordinator(self, request, context):  # type: ignore[no-untyped-def]
        return c.FindCoordinatorResponse(
            coordinators=[
                c.CoordinatorLocation(key=key, endpoint=self.endpoint) for key in request.keys
            ]
        )

    def ConsumerGroupHeartbeat(self, request, context):  # type: ignore[no-untyped-def]
        if request.member_epoch < 0:  # leaving
            return c.ConsumerGroupHeartbeatResponse(member_id=request.member_id, member_epoch=-1)
        topics = [
            c.TopicPartitions(topic=topic, partitions=range(size))
            for topic, size in self.sizes.items()
        ]
        return c.ConsumerGroupHeartbeatResponse(
            member_id=request.member_id,
            member_epoch=1,
            heartbeat_interval_ms=1000,
            assignment=c.OwnedPartitions(topics=topics),
        )

    def OffsetCommit(self, request, context):  # type: ignore[no-untyped-def]
        problem = partitions_problem(request) or batch_problem(request)
        self._record("OffsetCommit", request, problem)
        if problem is not None:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, problem)
        answer = c.OffsetCommitResponse()
        self._keep(request, answer)
        return answer

    def OffsetFetch(self, request, context):  # type: ignore[no-untyped-def]
        if (problem := partitions_problem(request)) is not None:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, problem)
        answer = c.OffsetFetchResponse()
        with self._lock:
            for topic in request.topics:
                result = answer.topics.add(name=topic.topic)
                for number in topic.partitions:
                    offset = self.committed.get((topic.topic, number), -1)
                    result.partitions.add(partition=number, committed_offset=offset)
        return answer

    def AddOffsetsToTxn(self, request, context):  # type: ignore[no-untyped-def]
        return x.AddOffsetsToTxnResponse()

    def TransactionStream(self, request_iterator, context):  # type: ignore[no-untyped-def]
        # A coordinator from before the stream: the client falls back to unary calls.
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "no TransactionStream here")

    def TxnOffsetCommit(self, request, context):  # type: ignore[no-untyped-def]
        refusal = txn_offsets_refusal(request)
        problem = refusal[1] if refusal is not None else batch_problem(request)
        self._record("TxnOffsetCommit", request, problem)
        if refusal is not None:
            context.abort(*refusal)
        answer = x.TxnOffsetCommitResponse()
        if problem is not None:  # the broker refused the batch: the coordinator says so
            for topic in request.topics:
                for p in topic.partitions:
                    answer.results.add(
                        topic=topic.name,
                        partition=p.partition,
                        error_code=ErrorCode.MESSAGE_TOO_LARGE,  # type: ignore[arg-type]
                        error_message=problem,
                    )
            return answer
        self._keep(request, c.OffsetCommitResponse())
        return answer

    def _record(self, method: str, request, problem: str | None) -> None:  # type: ignore[no-untyped-def]
        partitions = [(t.name, p.partition) for t in request.topics for p in t.partitions]
        with self._lock:
            self.requests.append((method, partitions))
            if problem is not None:
                self.refusals.append(problem)

    def _keep(self, request, answer) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            for topic in request.topics:
                result = answer.topics.add(name=topic.name)
                for p in topic.partitions:
                    self.committed[(topic.name, p.partition)] = p.committed_offset
                    result.partitions.add(partition=p.partition)


def batch_problem(request: c.OffsetCommitRequest | x.TxnOffsetCommitRequest) -> str | None:
    """Why the records of the commit `request` would not fit one batch of __consumer_offsets,
    by the coordinator's own check (for a TxnOffsetCommit the broker refuses that batch)."""
    as_commit = c.OffsetCommitRequest(group_id=request.group_id)
    for topic in request.topics:
        entry = as_commit.topics.add(name=topic.name)
        for p in topic.partitions:
            entry.partitions.add(
                partition=p.partition, committed_offset=p.committed_offset, metadata=p.metadata
            )
    now_ms = int(time.time() * 1000)  # as the coordinator's: the timestamps' bytes count
    return commit_size_problem(as_commit, now_ms)


@contextmanager
def serving(fake: FakeOffsetsCoordinator) -> Iterator[str]:
    """`fake` served on a loopback port (its own threads) until the block ends; yields its
    host:port, which FindCoordinator answers too."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    cg.add_CoordinatorLookupServiceServicer_to_server(fake, server)
    cg.add_GroupCoordinatorServiceServicer_to_server(fake, server)
    xg.add_TransactionCoordinatorServiceServicer_to_server(fake, server)
    fake.endpoint = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        yield fake.endpoint
    finally:
        server.stop(None).wait()

"""Deleting an ACL stops a client that is already reading or writing, at its next request.

Goal: a consumer fetching in a fetch session (KIP-227) names no partition in its incremental
fetches, yet is answered from all of its session's; once the super user deletes its READ ACL
(Admin.delete_acls), its next incremental fetch on the same FetchStream, or with the same
session id on unary Fetch, answers the session's partition TOPIC_AUTHORIZATION_FAILED naming the
topic (though nothing new was written to it), and the stream and the session go on answering,
as Kafka answers per partition. A producer's ProduceStream names its topics in every message, so
its next message after its WRITE ACL is deleted is answered TOPIC_AUTHORIZATION_FAILED too, and
the stream goes on.

Method: 1 controller and 1 broker started by acl_cluster.py (TLS and the authorizer on, real
processes stopped by PID also on failure); alice's certificate issued from the cluster's CA; raw
gRPC streams and calls with it, to follow one session and one stream across the deletion and
read the status as it is sent (the SDK's handling of PERMISSION_DENIED is another change's). The
deletion reaches the broker through the metadata log: the test fetches (or produces) until the
refusal comes, each fetch answered within its short max wait while nothing is new, and fails if
it never does.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator

import pytest
from acl_cluster import acl_cluster, allow, channel_as, grant, principal, super_user
from cluster_helpers import wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, Producer
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.metadata.acls import AclBinding, AclFilter, Operation, ResourceType
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(240)

ALICE = principal("alice")
RECORDS = 5
TOPICS = {"streamed": (1, 1), "unary": (1, 1), "written": (1, 1)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with acl_cluster(tmp_path_factory, "acl-revocation", topics=TOPICS) as running:
        with Producer({**super_user(running), "acks": "all"}) as producer:
            for topic in ("streamed", "unary"):
                for n in range(RECORDS):
                    producer.send(topic, b"r%d" % n)
            producer.flush(30)
        yield running


def acl(operation: Operation, topic: str) -> AclBinding:
    return allow(ALICE, operation, ResourceType.TOPIC, topic)


def revoke(cluster: LocalCluster, binding: AclBinding) -> None:
    selects = AclFilter(
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission,
    )
    with Admin(super_user(cluster)) as admin:
        [deletion] = admin.delete_acls([selects])
    assert deletion.error is None and list(deletion.deleted) == [binding], deletion


def alices_stub(cluster: LocalCluster) -> broker_pb2_grpc.BrokerServiceStub:
    channel = channel_as(cluster, cluster.spec.brokers[0].endpoint, "alice")
    return broker_pb2_grpc.BrokerServiceStub(channel)


def opening_fetch(topic: str) -> broker_pb2.FetchRequest:
    """A full fetch of partition 0 from offset 0 that opens a session."""
    wanted = broker_pb2.FetchRequest.PartitionData(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    return broker_pb2.FetchRequest(
        max_bytes=1 << 20,
        max_wait_ms=100,
        min_bytes=1,
        session_id=0,
        session_epoch=0,
        topics=[broker_pb2.FetchRequest.TopicData(name=topic, partitions=[wanted])],
    )


def incremental_fetch(session_id: int, epoch: int) -> broker_pb2.FetchRequest:
    """The session's next fetch, naming nothing: nothing moved (the records were read), so it
    waits at most max_wait_ms for news."""
    return broker_pb2.FetchRequest(
        max_bytes=1 << 20, max_wait_ms=100, min_bytes=1, session_id=session_id, session_epoch=epoch
    )


def records_in(answer: broker_pb2.FetchResponse) -> bool:
    return any(p.records for topic in answer.topics for p in topic.partitions)


def refused(answer: broker_pb2.FetchResponse | broker_pb2.ProduceResponse, what: str) -> bool:
    """Whether the answer's partition is TOPIC_AUTHORIZATION_FAILED, naming alice and `what`;
    any other error fails the test."""
    partitions = [p for topic in answer.topics for p in topic.partitions]
    for partition in partitions:
        if partition.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            assert partition.error_message.startswith(f"{ALICE} may not {what} ("), partition
            return True
        assert partition.error_code == 0, answer
    return False


def test_a_fetch_stream_answers_the_topic_refused_once_its_read_acl_is_deleted(
    cluster,
) -> None:
    read = acl(Operation.READ, "streamed")
    grant(cluster, read)
    stub = alices_stub(cluster)
    wait_until(
        "alice's READ applied on the broker",
        lambda: stub.Fetch(opening_fetch("streamed"), timeout=10).error_code == 0,
    )
    sent: queue.Queue[broker_pb2.FetchStreamRequest | None] = queue.Queue()
    answers = stub.FetchStream(iter(sent.get, None), timeout=120)
    try:
        sent.put(broker_pb2.FetchStreamRequest(request=opening_fetch("streamed")))
        opened = next(answers).response
        assert opened.error_code == 0 and opened.session_id and records_in(opened)
        epoch = 1

        def next_fetch_refused() -> bool:
            nonlocal epoch
            sent.put(
                broker_pb2.FetchStreamRequest(request=incremental_fetch(opened.session_id, epoch))
            )
            answer = next(answers).response
            assert answer.error_code == 0, answer  # the same session, still answered
            epoch += 1
            return refused(answer, "READ topic streamed")

        assert not next_fetch_refused()  # the session answers while she may read
        revoke(cluster, read)
        wait_until("the stream's next fetch refused", next_fetch_refused, timeout_s=60)
        next_fetch_refused()  # the stream and the session go on: answered, not aborted
    finally:
        sent.put(None)
        answers.cancel()


def test_a_unary_fetch_session_answers_the_topic_refused_once_read_is_deleted(
    cluster,
) -> None:
    read = acl(Operation.READ, "unary")
    grant(cluster, read)
    stub = alices_stub(cluster)
    opened = wait_until(
        "alice's READ applied on the broker",
        lambda: stub.Fetch(opening_fetch("unary"), timeout=10),
    )
    assert opened.error_code == 0 and opened.session_id and records_in(opened)
    epoch = 1

    def next_fetch_refused() -> bool:
        nonlocal epoch
        answer = stub.Fetch(incremental_fetch(opened.session_id, epoch), timeout=10)
        assert answer.error_code == 0, answer
        epoch += 1
        return refused(answer, "READ topic unary")

    assert not next_fetch_refused()
    revoke(cluster, read)
    wait_until("the session's next fetch refused", next_fetch_refused, timeout_s=60)
    next_fetch_refused()  # the session goes on


def test_a_produce_stream_answers_the_topic_refused_once_its_write_acl_is_deleted(cluster) -> None:
    write = acl(Operation.WRITE, "written")
    grant(cluster, write)
    stub = alices_stub(cluster)
    partition = broker_pb2.ProduceRequest.PartitionData(partition=0, records=build_batch([b"w"]))
    request = broker_pb2.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topics=[broker_pb2.ProduceRequest.TopicData(name="written", partitions=[partition])],
    )
    wait_until(
        "alice's WRITE applied on the broker",
        lambda: stub.Produce(request, timeout=10).topics[0].partitions[0].error_code == 0,
    )
    sent: queue.Queue[broker_pb2.ProduceStreamRequest | None] = queue.Queue()
    answers = stub.ProduceStream(iter(sent.get, None), timeout=120)
    correlation = 0
    try:

        def next_produce_refused() -> bool:
            nonlocal correlation
            correlation += 1
            sent.put(broker_pb2.ProduceStreamRequest(correlation_id=correlation, request=request))
            answer = next(answers)
            assert answer.correlation_id == correlation
            return refused(answer.response, "WRITE topic written")

        assert not next_produce_refused()
        revoke(cluster, write)
        wait_until("the stream's next produce refused", next_produce_refused, timeout_s=60)
        assert next_produce_refused()  # still answered on the same stream, still refused
    finally:
        sent.put(None)
        answers.cancel()

"""WriteTxnMarkers against a real cluster: members only, replicated before it answers, retried
safely, and never shown to consumers.

Goal: a stranger cannot write a transaction marker (PERMISSION_DENIED, nothing written), by the
unary call or on the coordinators' stream (whose proof is checked as it opens); a
member's marker is in both replicas' logs when the call answers (acks=all); a retry answers
success and writes nothing; consumers at either isolation level read every data record and no
marker; a producer cannot open a transaction by itself (INVALID_TXN_STATE).

Method: 1 controller and 2 broker processes over loopback, a topic with RF 2 and
min.insync.replicas 2; raw gRPC calls signed with the cluster secret, as a coordinator signs.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from cluster_helpers import admin_write, local_cluster, member_metadata, wait_until

from samsa.client import Admin, NewTopic, Producer
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2

TOPIC = "txn-markers"


def partition_state(cluster):  # type: ignore[no-untyped-def]
    answer = admin_write(
        cluster.spec, "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC])
    )
    return answer.topics[0].partitions[0]


def stub_for(cluster, broker_id: int) -> broker_pb2_grpc.BrokerServiceStub:  # type: ignore[no-untyped-def]
    endpoint = next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)
    return broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(endpoint))


def commit_marker(epoch: int) -> broker_pb2.WriteTxnMarkersRequest:
    return broker_pb2.WriteTxnMarkersRequest(
        markers=[
            broker_pb2.WriteTxnMarkersRequest.TransactionMarker(
                producer_id=4242,
                producer_epoch=epoch,
                committed=True,
                coordinator_epoch=0,
                topics=[
                    broker_pb2.WriteTxnMarkersRequest.TopicPartitions(name=TOPIC, partitions=[0])
                ],
            )
        ],
        timeout_ms=10_000,
    )


def codes(response: broker_pb2.WriteTxnMarkersResponse) -> list[int]:
    return [p.error_code for m in response.markers for t in m.topics for p in t.partitions]


def log_end(stub: broker_pb2_grpc.BrokerServiceStub, isolation: int) -> tuple[int, list[bytes]]:
    """(next fetch offset after reading everything, the values read) as a consumer reads them."""
    request = broker_pb2.FetchRequest(
        max_wait_ms=0,
        isolation_level=isolation,
        decode_records=True,
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name=TOPIC, partitions=[broker_pb2.FetchRequest.PartitionData(partition=0)]
            )
        ],
    )
    result = stub.Fetch(request, timeout=10).topics[0].partitions[0]
    assert result.error_code == 0, result.error_message
    return result.next_fetch_offset, [record.value for record in result.decoded_records]


def test_markers_are_for_members_replicated_and_never_shown(tmp_path: Path) -> None:
    with local_cluster(tmp_path, 1, 2) as cluster:
        with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 2, {"min.insync.replicas": "2"})])
        state = wait_until(
            "a leader and a full ISR",
            lambda: (s := partition_state(cluster)).leader >= 0 and len(s.isr) == 2 and s,
            60,
        )
        with Producer({"bootstrap.servers": cluster.spec.bootstrap_servers}) as producer:
            for value in (b"a", b"b", b"c"):
                producer.send(TOPIC, value, partition=0)
            producer.flush(30)
        leader = stub_for(cluster, state.leader)
        follower = stub_for(cluster, next(r for r in state.replicas if r != state.leader))

        with pytest.raises(grpc.RpcError) as stranger:
            leader.WriteTxnMarkers(commit_marker(1), timeout=15)
        assert stranger.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "transaction coordinators" in (stranger.value.details() or "")
        assert log_end(leader, 0)[0] == 3, "nothing was written"

        def signed() -> tuple[tuple[str, str], ...]:
            return member_metadata(tmp_path, "WriteTxnMarkers", state.leader)

        answer = leader.WriteTxnMarkers(commit_marker(1), metadata=signed(), timeout=15)
        assert codes(answer) == [0]
        # acks=all: the follower holds the marker once the call answered; it serves consumers
        # up to its high watermark, which the marker's replication moved past it.
        for stub in (leader, follower):
            for isolation in (0, 2):
                wait_until(
                    "the marker below the high watermark",
                    lambda stub=stub, isolation=isolation: log_end(stub, isolation)[0] == 4,
                    15,
                )
                assert log_end(stub, isolation)[1] == [b"a", b"b", b"c"]

        again = leader.WriteTxnMarkers(commit_marker(1), metadata=signed(), timeout=15)
        assert codes(again) == [0], "a retry succeeds"
        assert log_end(leader, 0)[0] == 4, "and writes nothing"

        # The coordinators' stream: members only, proved as it opens; answers by correlation id.
        def stream(metadata, *correlation_ids: int):  # type: ignore[no-untyped-def]
            requests = [
                broker_pb2.WriteTxnMarkersStreamRequest(correlation_id=i, request=commit_marker(1))
                for i in correlation_ids
            ]
            return list(leader.WriteTxnMarkersStream(iter(requests), metadata=metadata, timeout=15))

        with pytest.raises(grpc.RpcError) as stranger_stream:
            stream((), 1)
        assert stranger_stream.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as wrong_method:
            stream(signed(), 1)  # a proof for the unary call does not open the stream
        assert wrong_method.value.code() == grpc.StatusCode.PERMISSION_DENIED
        answers = stream(member_metadata(tmp_path, "WriteTxnMarkersStream", state.leader), 7, 8)
        assert sorted(answer.correlation_id for answer in answers) == [7, 8]
        assert all(codes(answer.response) == [0] for answer in answers), "retries succeed"
        assert log_end(leader, 0)[0] == 4, "and write nothing"

        produce = broker_pb2.ProduceRequest(
            acks=-1,
            topics=[
                broker_pb2.ProduceRequest.TopicData(
                    name=TOPIC,
                    partitions=[
                        broker_pb2.ProduceRequest.PartitionData(
                            partition=0,
                            records=build_batch(
                                [b"t"],
                                producer_id=4242,
                                producer_epoch=1,
                                base_sequence=0,
                                transactional=True,
                            ),
                        )
                    ],
                )
            ],
        )
        refused = leader.Produce(produce, timeout=15).topics[0].partitions[0]
        assert refused.error_code == ErrorCode.INVALID_TXN_STATE, refused.error_message
        assert log_end(leader, 0)[0] == 4

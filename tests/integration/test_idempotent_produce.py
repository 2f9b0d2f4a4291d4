"""Idempotent produce against a real broker, with generated code only (what any client sees).

Goal: a batch retried with the same producer id, epoch and sequence is written once and answers
its original offset — also after the broker is restarted cleanly and after it is killed with
kill -9 (the producer state comes back from its snapshots and the log). A gap answers
OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH, and neither stores anything.

Method: one controller, one broker, a single-replica topic; batches encoded with the codec and
sent over the broker's Produce RPC, as a client in another language would. Processes are stopped
by PID on the way out, also on failure.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from cluster_helpers import admin_write, local_cluster, wait_until

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2

pytestmark = pytest.mark.timeout(240)
TOPIC = "idempotent"


def produce(stub, data: bytes) -> broker_pb2.ProduceResponse.PartitionResponse:
    request = broker_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topics=[
            broker_pb2.ProduceRequest.TopicData(
                name=TOPIC,
                partitions=[broker_pb2.ProduceRequest.PartitionData(partition=0, records=data)],
            )
        ],
    )
    return stub.Produce(request, timeout=30).topics[0].partitions[0]


def batch(producer_id: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    return build_batch(
        list(values), producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


def log_end(stub) -> int:
    request = broker_pb2.ListOffsetsRequest(
        topics=[
            broker_pb2.ListOffsetsRequest.TopicData(
                name=TOPIC,
                partitions=[
                    broker_pb2.ListOffsetsRequest.PartitionData(
                        partition=0, offset_spec=broker_pb2.OFFSET_SPEC_LATEST
                    )
                ],
            )
        ]
    )
    return stub.ListOffsets(request, timeout=10).topics[0].partitions[0].offset


def test_retries_are_written_once_across_restarts_and_kills(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        answer = admin_write(
            cluster.spec,
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreateTopicsRequest.Topic(
                        name=TOPIC, num_partitions=1, replication_factor=1
                    )
                ]
            ),
        )
        assert answer.topics[0].error_code == 0, answer.topics[0].error_message
        endpoint = cluster.spec.brokers[0].endpoint
        stub = broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(endpoint))
        identity = wait_until(
            "a producer id",
            lambda: (
                (r := stub.InitProducerId(broker_pb2.InitProducerIdRequest(), timeout=10))
                and r.error_code == 0
                and r
            ),
        )
        pid, epoch = identity.producer_id, identity.producer_epoch
        assert (pid >= 0, epoch) == (True, 0)

        first = batch(pid, epoch, 0, b"a", b"b")
        written = wait_until(
            "the first append", lambda: (r := produce(stub, first)).error_code == 0 and r
        )
        second = batch(pid, epoch, 2, b"c")
        assert produce(stub, second).base_offset == written.base_offset + 2
        end = log_end(stub)

        def assert_retry_deduplicated() -> None:
            again = produce(stub, second)
            assert (again.error_code, again.base_offset) == (0, written.base_offset + 2)
            assert log_end(stub) == end

        assert_retry_deduplicated()
        gap = produce(stub, batch(pid, epoch, 7, b"x"))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, gap.error_message
        assert log_end(stub) == end

        cluster.stop_all()  # a clean stop: the state is snapshotted at close
        cluster.start_all()
        wait_until("the broker back", lambda: produce(stub, second).error_code == 0)
        assert_retry_deduplicated()

        cluster.kill("broker-1")  # kill -9: rebuilt from the roll snapshots and the log
        cluster.start("broker-1")
        wait_until("the broker back", lambda: produce(stub, second).error_code == 0)
        assert_retry_deduplicated()

        bumped = produce(stub, batch(pid, epoch + 1, 0, b"d"))
        assert bumped.error_code == 0, bumped.error_message
        fenced = produce(stub, batch(pid, epoch, 3, b"e"))
        assert fenced.error_code == ErrorCode.INVALID_PRODUCER_EPOCH, fenced.error_message
        assert log_end(stub) == end + 1

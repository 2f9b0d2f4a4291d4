"""What the transaction coordinator's integration tests share (test_transaction_coordinator.py,
test_transaction_offsets.py, test_transaction_produce_checks.py): the cluster each module starts
(one controller, two brokers, two coordinators; `__transaction_state` with 2 partitions at RF 2,
a short abort interval; the topic TOPIC with 2 partitions at RF 2), and plain-stub calls to a
transactional id's coordinator, as a client in any language would send them. Markers are
observed as the partitions' log end offsets (a marker is one offset)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import grpc
from cluster_helpers import FAST_SETTINGS, local_cluster, open_channel, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import TRANSACTION_KEY_TYPE
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg

TOPIC = "payments"
SETTINGS = dict(FAST_SETTINGS) | {
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "2",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
}
RETRIABLE = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


@contextmanager
def transactions_cluster(data_dir: Path) -> Iterator[LocalCluster]:
    """The started cluster with TOPIC created; every process is stopped by PID on the way out."""
    with local_cluster(data_dir, 1, 2, SETTINGS, coordinators=2) as cluster:
        endpoint = cluster.spec.controllers[0].endpoint
        stub = controller_pb2_grpc.ControllerServiceStub(open_channel(endpoint))
        topic = controller_pb2.CreateTopicsRequest.Topic(
            name=TOPIC, num_partitions=2, replication_factor=2
        )
        answer = stub.CreateTopics(controller_pb2.CreateTopicsRequest(topics=[topic]), timeout=10)
        assert answer.topics[0].error_code == ErrorCode.NONE, answer
        yield cluster


def locate(cluster: LocalCluster, transactional_id: str) -> c.CoordinatorLocation:
    stub = cg.CoordinatorLookupServiceStub(open_channel(cluster.spec.brokers[0].endpoint))

    def found() -> c.CoordinatorLocation | None:
        request = c.FindCoordinatorRequest(key_type=TRANSACTION_KEY_TYPE, keys=[transactional_id])
        location = stub.FindCoordinator(request, timeout=5).coordinators[0]
        return None if location.error_code else location

    return wait_until(f"a coordinator for {transactional_id}", found, timeout_s=30)


def call(cluster: LocalCluster, transactional_id: str, method: str, request: object) -> object:
    """Send `request` to the id's coordinator, retrying retriable answers (finding it again)."""

    def answered() -> object | None:
        location = locate(cluster, transactional_id)
        stub = xg.TransactionCoordinatorServiceStub(open_channel(location.endpoint))
        try:
            response = getattr(stub, method)(request, timeout=10)
        except grpc.RpcError:
            return None
        if method == "DescribeTransactions":
            code = response.transactions[0].error_code
        else:
            code = getattr(response, "error_code", ErrorCode.NONE)
        return None if code in RETRIABLE else response

    return wait_until(f"{method} for {transactional_id}", answered, timeout_s=60)


def init_transactions(
    cluster: LocalCluster, transactional_id: str, timeout_ms: int = 60_000
) -> x.InitTransactionsResponse:
    """InitTransactions for the id with a transaction timeout of `timeout_ms`, through `call`."""
    request = x.InitTransactionsRequest(
        transactional_id=transactional_id, transaction_timeout_ms=timeout_ms
    )
    answer = call(cluster, transactional_id, "InitTransactions", request)
    return cast(x.InitTransactionsResponse, answer)


def producer(
    transactional_id: str, identity: x.InitTransactionsResponse
) -> x.TransactionalProducer:
    return x.TransactionalProducer(
        transactional_id=transactional_id,
        producer_id=identity.producer_id,
        producer_epoch=identity.producer_epoch,
    )


def add(who: x.TransactionalProducer, *partitions: int, topic: str = TOPIC, verify: bool = False):
    return x.AddPartitionsToTxnRequest(
        producer=who,
        partitions=[c.TopicPartitions(topic=topic, partitions=list(partitions))],
        verify_only=verify,
    )


def describe(cluster: LocalCluster, transactional_id: str) -> x.DescribedTransaction:
    request = x.DescribeTransactionsRequest(transactional_ids=[transactional_id])
    return call(cluster, transactional_id, "DescribeTransactions", request).transactions[0]  # type: ignore[attr-defined]


def log_ends(cluster: LocalCluster) -> list[int]:
    """The log end offset (read_uncommitted LATEST) of each partition of TOPIC."""
    ends = []
    for partition in (0, 1):
        for broker in cluster.spec.brokers:
            stub = broker_pb2_grpc.BrokerServiceStub(open_channel(broker.endpoint))
            request = broker_pb2.ListOffsetsRequest(
                topics=[
                    broker_pb2.ListOffsetsRequest.TopicData(
                        name=TOPIC,
                        partitions=[
                            broker_pb2.ListOffsetsRequest.PartitionData(
                                partition=partition, offset_spec=broker_pb2.OFFSET_SPEC_LATEST
                            )
                        ],
                    )
                ]
            )
            answer = stub.ListOffsets(request, timeout=5).topics[0].partitions[0]
            if answer.error_code == ErrorCode.NONE:
                ends.append(answer.offset)
                break
        else:
            raise AssertionError(f"no leader answered for {TOPIC}-{partition}")
    return ends

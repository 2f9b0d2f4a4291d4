"""Goal: a read at a `min_metadata_offset` beyond the committed metadata log is refused for good
(INVALID_ARGUMENT, saying where the log ends and what to send) by a real active controller, and
the SDK raises it at once instead of retrying other controllers until its timeout.

Method: a 1-controller, 1-broker local cluster (the lone controller is the active one); a raw
DescribeTopics stub call and the SDK's `ClusterMetadata.read`. Offsets in between (committed
elsewhere, not yet applied here) and followers, which cannot tell, are covered without a cluster
in tests/unit/controller/test_read_at_offset.py.
"""

from __future__ import annotations

import grpc
import pytest
from cluster_helpers import controller_stub, local_cluster

from samsa.client.channels import Channels
from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("offset"), controllers=1, brokers=1) as running:
        yield running.spec.controllers[0].endpoint


def test_an_offset_beyond_the_log_is_invalid_argument_with_the_current_offset(
    endpoint: str,
) -> None:
    stub = controller_stub(endpoint)
    current = stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=10)
    offset = current.status.metadata_offset
    served = stub.DescribeTopics(
        controller_pb2.DescribeTopicsRequest(min_metadata_offset=offset), timeout=10
    )
    assert served.status.metadata_offset >= offset
    with pytest.raises(grpc.RpcError) as refused:
        stub.DescribeTopics(
            controller_pb2.DescribeTopicsRequest(min_metadata_offset=10**12), timeout=20
        )
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "min_metadata_offset 1000000000000" in refused.value.details()
    assert "ends at offset" in refused.value.details()


def test_the_sdk_raises_the_refusal_instead_of_retrying(endpoint: str) -> None:
    channels = Channels()
    try:
        metadata = ClusterMetadata([endpoint], channels)
        with pytest.raises(KafkaError) as refused:
            metadata.read(
                "DescribeTopics",
                controller_pb2.DescribeTopicsRequest(min_metadata_offset=10**12),
                timeout_s=30,
            )
    finally:
        channels.close()
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert "ends at offset" in str(refused.value)

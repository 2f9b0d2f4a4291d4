"""Goal: producer ids are unique across the cluster and across controller failover (KIP-730):
every broker answers InitProducerId with an id no broker ever gave before, and once the active
controller dies and another is elected, every block handed out afterwards lies above every id
handed out before, because the next id lives in the replicated metadata log.

Method: one cluster of three controllers and two brokers (processes stopped by PID, also on
failure). InitProducerId is called on both brokers, concurrently too (a broker without a block
makes one AllocateProducerIds and its callers wait for it). For the failover, the test also takes
blocks itself with AllocateProducerIds, signed as broker 1 with the cluster secret, so it knows
exactly where the controller's next id stood before and after. It kills -9 the active controller,
waits for another, takes a block from the new one, then draws more than a block's worth of ids
from each broker so that both must take new blocks from the new controller. All ids and blocks
must be distinct, each broker's ids must increase, and everything after the kill lies above
everything before it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from cluster_helpers import (
    active_controller,
    admin_write,
    controller_stub,
    local_cluster,
    member_metadata,
    wait_until,
)

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2

pytestmark = pytest.mark.timeout(240)

BLOCK = limits.producer_id_block_size


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("pids"), controllers=3, brokers=2) as running:
        yield running


def broker_stub(cluster, broker_id: int) -> broker_pb2_grpc.BrokerServiceStub:
    endpoint = next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)
    return broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(endpoint))


def init_producer_ids(stub: broker_pb2_grpc.BrokerServiceStub, count: int) -> list[int]:
    ids = []
    for _ in range(count):
        answer = stub.InitProducerId(broker_pb2.InitProducerIdRequest(), timeout=10)
        assert answer.error_code == 0, answer.error_message
        assert answer.producer_epoch == 0
        ids.append(answer.producer_id)
    return ids


def take_block(cluster, data_dir: Path, alive: set[int] | None = None) -> range:
    """A block taken from the active controller (among `alive` ones) as broker 1, signed with
    the cluster secret."""
    active = wait_until("an active controller", lambda: active_controller(cluster.spec, alive), 60)
    endpoint = next(c.endpoint for c in cluster.spec.controllers if c.node_id == active)
    described = admin_write(
        cluster.spec, "DescribeCluster", controller_pb2.DescribeClusterRequest()
    )
    epoch = next(b.broker_epoch for b in described.brokers if b.broker_id == 1)

    def allocate() -> controller_pb2.AllocateProducerIdsResponse | None:
        answer = controller_stub(endpoint).AllocateProducerIds(
            controller_pb2.AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch),
            timeout=10,
            metadata=member_metadata(data_dir, "AllocateProducerIds", 1),
        )
        return answer if answer.status.error_code != ErrorCode.NOT_CONTROLLER else None

    answer = wait_until("a block from the active controller", allocate, 60)
    assert answer.status.error_code == 0, answer.status.error_message
    assert answer.producer_id_len == BLOCK
    return range(answer.producer_id_start, answer.producer_id_start + answer.producer_id_len)


def test_two_brokers_hand_out_distinct_ids_also_to_concurrent_callers(cluster) -> None:
    stubs = [broker_stub(cluster, b.broker_id) for b in cluster.spec.brokers]
    with ThreadPoolExecutor(max_workers=8) as pool:
        batches = list(pool.map(lambda i: init_producer_ids(stubs[i % 2], 25), range(8)))
    ids = [i for batch in batches for i in batch]
    assert len(ids) == 200 and len(set(ids)) == 200, "an id was handed out twice"
    assert all(i >= 0 for i in ids)
    refused = stubs[0].InitProducerId(
        broker_pb2.InitProducerIdRequest(transactional_id="txn"), timeout=10
    )
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert "transaction coordinator" in refused.error_message


def test_ids_after_a_controller_failover_lie_above_every_id_before(
    cluster, tmp_path_factory
) -> None:
    data_dir = cluster.data_dir
    stubs = {b.broker_id: broker_stub(cluster, b.broker_id) for b in cluster.spec.brokers}
    before = {broker_id: init_producer_ids(stub, 5) for broker_id, stub in stubs.items()}
    block_before = take_block(cluster, data_dir)

    old = wait_until("an active controller", lambda: active_controller(cluster.spec))
    cluster.kill(f"controller-{old}")
    alive = {c.node_id for c in cluster.spec.controllers} - {old}
    new = wait_until(
        "a new active controller", lambda: active_controller(cluster.spec, alive), timeout_s=60
    )
    assert new != old

    block_after = take_block(cluster, data_dir, alive)
    every_before = [i for ids in before.values() for i in ids] + list(block_before)
    assert block_after.start >= max(every_before) + 1, (
        f"the new controller's block {block_after} does not lie above every id before "
        f"(up to {max(every_before)}): ids would repeat"
    )
    # More than a block per broker: each must take at least one block from the new controller.
    after = {broker_id: init_producer_ids(stub, BLOCK + 100) for broker_id, stub in stubs.items()}
    for broker_id, ids in after.items():
        sequence = before[broker_id] + ids
        assert sequence == sorted(set(sequence)), f"broker {broker_id}'s ids must increase"
        newer = [i for i in ids if i >= block_after.stop]
        assert newer, f"broker {broker_id} took no block from the new controller"
        assert min(newer) > max(every_before)
    handed = every_before + list(block_after) + [i for ids in after.values() for i in ids]
    assert len(handed) == len(set(handed)), "a producer id was handed out twice"
    assert not cluster.exited(), cluster.exited()

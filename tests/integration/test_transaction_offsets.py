"""Goal: a group's offsets committed in a transaction (KIP-447: AddOffsetsToTxn, then
TxnOffsetCommit to the group's coordinator) take effect at its COMMIT marker only and vanish at
its ABORT, with OffsetFetch(require_stable) answering UNSTABLE_OFFSET_COMMIT meanwhile; offsets
of a group never added to the transaction are refused (KIP-890); and pending offsets survive
the group's coordinator killed with SIGKILL.

Method: the cluster of transaction_test_helpers.py (two coordinators, real processes), plain
generated stubs for every request.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import grpc
import pytest
from cluster_helpers import open_channel, wait_until
from transaction_test_helpers import (
    RETRIABLE,
    TOPIC,
    call,
    init_transactions,
    producer,
    transactions_cluster,
)

from samsa.cli.launcher import LocalCluster
from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import GROUP_KEY_TYPE
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import coordinator_pb2_grpc as cg
from samsa.v1 import transactions_pb2 as x
from samsa.v1 import transactions_pb2_grpc as xg

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with transactions_cluster(tmp_path_factory.mktemp("transaction-offsets")) as cluster:
        yield cluster


def group_call(cluster: LocalCluster, group_id: str, method: str, request: object) -> object:
    """Send `request` to the group's coordinator (TxnOffsetCommit, OffsetFetch), retrying
    while it moves or loads."""
    lookup = cg.CoordinatorLookupServiceStub(open_channel(cluster.spec.brokers[0].endpoint))

    def answered() -> object | None:
        find = c.FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, keys=[group_id])
        location = lookup.FindCoordinator(find, timeout=5).coordinators[0]
        if location.error_code:
            return None
        channel = open_channel(location.endpoint)
        try:
            if method == "OffsetFetch":
                response = cg.GroupCoordinatorServiceStub(channel).OffsetFetch(request, timeout=10)
                code = response.error_code
            else:
                response = xg.TransactionCoordinatorServiceStub(channel).TxnOffsetCommit(
                    request, timeout=10
                )
                code = response.results[0].error_code
        except grpc.RpcError:
            return None
        return None if code in RETRIABLE else response

    return wait_until(f"{method} for {group_id}", answered, timeout_s=60)


def committed_offset(cluster: LocalCluster, group_id: str) -> tuple[int, int]:
    """(offset, error code) of TOPIC-0 for the group, with require_stable."""
    request = c.OffsetFetchRequest(
        group_id=group_id,
        topics=[c.TopicPartitions(topic=TOPIC, partitions=[0])],
        require_stable=True,
    )
    answer = group_call(cluster, group_id, "OffsetFetch", request).topics[0].partitions[0]  # type: ignore[attr-defined]
    return answer.committed_offset, answer.error_code


def offsets_in_transaction(
    cluster: LocalCluster, name: str, group_id: str, offset: int
) -> x.TransactionalProducer:
    """Init `name`, add the group's offsets to its transaction and commit `offset` in it."""
    identity = init_transactions(cluster, name)
    me = producer(name, identity)
    added = call(
        cluster, name, "AddOffsetsToTxn", x.AddOffsetsToTxnRequest(producer=me, group_id=group_id)
    )
    assert added.error_code == ErrorCode.NONE, added  # type: ignore[attr-defined]
    request = x.TxnOffsetCommitRequest(
        producer=me, group_id=group_id, member_id="", member_epoch=-1
    )
    request.topics.add(name=TOPIC).partitions.add(partition=0, committed_offset=offset)
    answer = group_call(cluster, group_id, "TxnOffsetCommit", request)
    assert [r.error_code for r in answer.results] == [ErrorCode.NONE], answer  # type: ignore[attr-defined]
    return me


def test_offsets_committed_in_a_transaction_appear_at_its_commit_only(
    cluster: LocalCluster,
) -> None:
    me = offsets_in_transaction(cluster, "copier", "copy-group", 42)
    assert committed_offset(cluster, "copy-group") == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    ended = call(
        cluster, me.transactional_id, "EndTxn", x.EndTxnRequest(producer=me, committed=True)
    )
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "the offset committed",
        lambda: committed_offset(cluster, "copy-group") == (42, ErrorCode.NONE),
        30,
    )

    aborted = offsets_in_transaction(cluster, "copier", "copy-group", 99)
    assert committed_offset(cluster, "copy-group") == (42, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    ended = call(cluster, "copier", "EndTxn", x.EndTxnRequest(producer=aborted, committed=False))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "the abort resolved",
        lambda: committed_offset(cluster, "copy-group") == (42, ErrorCode.NONE),
        30,
    )


def test_offsets_of_a_group_not_added_to_the_transaction_are_refused(
    cluster: LocalCluster,
) -> None:
    """KIP-890 for offsets: TxnOffsetCommit without AddOffsetsToTxn would leave offsets that no
    marker resolves (the group's partition is not in the transaction): the group coordinator
    asks the transaction coordinator first and refuses with INVALID_TXN_STATE, writing
    nothing (the group's offset stays stable)."""
    name, group_id = "no-add-app", "no-add-group"
    me = producer(name, init_transactions(cluster, name))
    request = x.TxnOffsetCommitRequest(
        producer=me, group_id=group_id, member_id="", member_epoch=-1
    )
    request.topics.add(name=TOPIC).partitions.add(partition=0, committed_offset=7)
    answer = group_call(cluster, group_id, "TxnOffsetCommit", request).results[0]  # type: ignore[attr-defined]
    assert answer.error_code == ErrorCode.INVALID_TXN_STATE, answer
    assert "AddOffsetsToTxn" in answer.error_message
    assert committed_offset(cluster, group_id) == (-1, ErrorCode.NONE), "nothing pending"


def test_pending_offsets_survive_the_group_coordinator_killed(cluster: LocalCluster) -> None:
    for name in sorted(cluster.killed):
        if name.startswith("coordinator-"):
            cluster.start(name)  # an earlier test killed one: two are needed here
    lookup = cg.CoordinatorLookupServiceStub(open_channel(cluster.spec.brokers[0].endpoint))

    def owner() -> int | None:
        find = c.FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, keys=["moving-group"])
        location = lookup.FindCoordinator(find, timeout=5).coordinators[0]
        return None if location.error_code else location.coordinator_id

    wait_until(
        "both coordinators registered",
        lambda: (
            len(
                {
                    c.coordinator_id
                    for c in lookup.FindCoordinator(
                        c.FindCoordinatorRequest(
                            key_type=GROUP_KEY_TYPE, keys=[f"g{i}" for i in range(16)]
                        ),
                        timeout=5,
                    ).coordinators
                    if not c.error_code
                }
            )
            == 2
        ),
        60,
    )
    me = offsets_in_transaction(cluster, "mover", "moving-group", 7)
    first = wait_until("the group's coordinator", owner, 30)
    cluster.kill(f"coordinator-{first}", signal.SIGKILL)
    wait_until("another coordinator for the group", lambda: owner() not in (None, first), 30)
    assert committed_offset(cluster, "moving-group") == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), (
        "the pending offset was loaded from __consumer_offsets"
    )
    ended = call(cluster, "mover", "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "the offset committed at the new owner",
        lambda: committed_offset(cluster, "moving-group") == (7, ErrorCode.NONE),
        30,
    )

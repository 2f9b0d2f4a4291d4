"""Goal: the transaction coordinator serves TransactionCoordinatorService over real gRPC: a
transactional id gets a producer id and epoch; partitions join its transaction (unknown and
internal ones are refused) and a broker's verify_only check sees exactly them at exactly that
identity; a commit bumps the epoch and writes a COMMIT marker to every partition (phase 2),
then records COMPLETE_COMMIT; a second InitTransactions fences the first instance; a
transaction past its timeout is aborted and its producer fenced; Admin and the CLI list and
describe transactions; and when the coordinator owning an open transaction is killed with
SIGKILL, the other loads it from `__transaction_state` and ends it.

Method: the cluster of transaction_test_helpers.py (real processes from the launcher, stopped by
PID also on failure); requests are plain generated stubs. Offsets in transactions are
test_transaction_offsets.py's, brokers' checks of transactional produce
test_transaction_produce_checks.py's.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from cluster_helpers import wait_until
from transaction_test_helpers import (
    TOPIC,
    add,
    call,
    describe,
    init_transactions,
    locate,
    log_ends,
    producer,
    transactions_cluster,
)

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin
from samsa.client.transaction_admin import TransactionError
from samsa.common.errors import ErrorCode
from samsa.v1 import transaction_records_pb2 as t
from samsa.v1 import transactions_pb2 as x

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with transactions_cluster(tmp_path_factory.mktemp("transactions")) as cluster:
        yield cluster


def test_a_commit_writes_markers_and_a_second_instance_fences_the_first(
    cluster: LocalCluster,
) -> None:
    name = "payments-app"
    first = init_transactions(cluster, name)
    assert first.error_code == ErrorCode.NONE and first.producer_id >= 0, first
    assert first.producer_epoch == 0
    me = producer(name, first)

    refused = call(cluster, name, "AddPartitionsToTxn", add(me, 0, 7))
    assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, refused  # type: ignore[attr-defined]
    internal = call(cluster, name, "AddPartitionsToTxn", add(me, 0, topic="__consumer_offsets"))
    assert internal.error_code == ErrorCode.INVALID_REQUEST, internal  # type: ignore[attr-defined]
    assert describe(cluster, name).state == t.TRANSACTION_STATE_EMPTY, "nothing was added"

    added = call(cluster, name, "AddPartitionsToTxn", add(me, 0, 1))
    assert added.error_code == ErrorCode.NONE, added  # type: ignore[attr-defined]
    verified = call(cluster, name, "AddPartitionsToTxn", add(me, 1, verify=True))
    assert verified.error_code == ErrorCode.NONE, verified  # type: ignore[attr-defined]
    assert [r.error_code for r in verified.results] == [ErrorCode.NONE]  # type: ignore[attr-defined]
    stranger = x.TransactionalProducer(
        transactional_id=name, producer_id=me.producer_id, producer_epoch=me.producer_epoch + 1
    )
    not_it = call(cluster, name, "AddPartitionsToTxn", add(stranger, 1, verify=True))
    assert not_it.error_code == ErrorCode.PRODUCER_FENCED, not_it  # type: ignore[attr-defined]

    described = describe(cluster, name)
    assert described.state == t.TRANSACTION_STATE_ONGOING
    assert [(p.topic, list(p.partitions)) for p in described.partitions] == [(TOPIC, [0, 1])]
    listed = call(cluster, name, "ListTransactions", x.ListTransactionsRequest())
    assert name in [entry.transactional_id for entry in listed.transactions]  # type: ignore[attr-defined]

    before = log_ends(cluster)
    ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    assert (ended.producer_id, ended.producer_epoch) == (me.producer_id, 1)  # type: ignore[attr-defined]
    wait_until(
        "COMPLETE_COMMIT",
        lambda: describe(cluster, name).state == t.TRANSACTION_STATE_COMPLETE_COMMIT,
        30,
    )
    assert log_ends(cluster) == [end + 1 for end in before], "one COMMIT marker per partition"
    retry = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert retry.error_code == ErrorCode.NONE, "a retried EndTxn answers the same"  # type: ignore[attr-defined]
    assert retry.producer_epoch == 1  # type: ignore[attr-defined]

    second = init_transactions(cluster, name)
    assert (second.producer_id, second.producer_epoch) == (me.producer_id, 2)
    after_commit = x.TransactionalProducer(
        transactional_id=name, producer_id=me.producer_id, producer_epoch=1
    )
    fenced = call(cluster, name, "AddPartitionsToTxn", add(after_commit, 0))
    assert fenced.error_code == ErrorCode.PRODUCER_FENCED, fenced  # type: ignore[attr-defined]


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    cluster: LocalCluster,
) -> None:
    name = "slow-app"
    identity = init_transactions(cluster, name, timeout_ms=1_000)
    me = producer(name, identity)
    before = log_ends(cluster)
    assert call(cluster, name, "AddPartitionsToTxn", add(me, 1)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    aborted = wait_until(
        "the timed-out transaction aborted",
        lambda: (d := describe(cluster, name)).state == t.TRANSACTION_STATE_COMPLETE_ABORT and d,
        30,
    )
    assert aborted.producer_epoch == me.producer_epoch + 1, "the abort bumped the epoch"
    assert log_ends(cluster)[1] == before[1] + 1, "one ABORT marker"
    late = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=True))
    assert late.error_code == ErrorCode.PRODUCER_FENCED, late  # type: ignore[attr-defined]


def test_admin_and_cli_list_and_describe_transactions(cluster: LocalCluster) -> None:
    name = "listed-app"
    identity = init_transactions(cluster, name)
    me = producer(name, identity)
    assert call(cluster, name, "AddPartitionsToTxn", add(me, 1)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        ongoing = admin.list_transactions(states=["Ongoing"])
        assert [(t.transactional_id, t.state) for t in ongoing] == [(name, "Ongoing")]
        assert name in [t.transactional_id for t in admin.list_transactions()]
        assert admin.list_transactions(producer_ids=[me.producer_id])[0].transactional_id == name
        described = admin.describe_transactions([name])[name]
        assert (described.state, described.producer_id, described.partitions) == (
            "Ongoing",
            me.producer_id,
            ((TOPIC, 1),),
        )
        with pytest.raises(TransactionError) as unknown:
            admin.describe_transactions(["never-seen"])
        assert unknown.value.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    bootstrap = cluster.spec.bootstrap_servers
    cli = [sys.executable, "-m", "samsa.cli.main", "transactions"]
    listed = subprocess.run(
        [*cli, "list", "--state", "ongoing", "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert name in listed.stdout and "Ongoing" in listed.stdout
    shown = subprocess.run(
        [*cli, "describe", name, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"partitions {TOPIC}:1" in shown.stdout
    ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=False))
    assert ended.error_code == ErrorCode.NONE  # type: ignore[attr-defined]


def test_an_open_transaction_survives_its_coordinator_killed(cluster: LocalCluster) -> None:
    name = "survivor"
    identity = init_transactions(cluster, name, timeout_ms=120_000)
    me = producer(name, identity)
    assert call(cluster, name, "AddPartitionsToTxn", add(me, 0)).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    owner = locate(cluster, name).coordinator_id
    cluster.kill(f"coordinator-{owner}", signal.SIGKILL)
    wait_until(
        "another coordinator for the id",
        lambda: locate(cluster, name).coordinator_id != owner,
        30,
    )
    described = describe(cluster, name)
    assert described.state == t.TRANSACTION_STATE_ONGOING, "loaded from __transaction_state"
    assert (described.producer_id, described.producer_epoch) == (me.producer_id, 0)
    before = log_ends(cluster)
    ended = call(cluster, name, "EndTxn", x.EndTxnRequest(producer=me, committed=False))
    assert ended.error_code == ErrorCode.NONE, ended  # type: ignore[attr-defined]
    wait_until(
        "COMPLETE_ABORT",
        lambda: describe(cluster, name).state == t.TRANSACTION_STATE_COMPLETE_ABORT,
        30,
    )
    assert log_ends(cluster)[0] == before[0] + 1

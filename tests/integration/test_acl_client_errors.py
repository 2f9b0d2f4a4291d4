"""A client the ACLs refuse fails at once with Kafka's code, through every SDK path and the CLI.

Goal: on a cluster enforcing ACLs, bob (a certificate with no ACL, or with DESCRIBE only) is
told at once, not after a deadline: Producer.send(...).result() raises ProduceError
TOPIC_AUTHORIZATION_FAILED (an AuthorizationError naming the topic too), Consumer.poll raises
AuthorizationError TOPIC_AUTHORIZATION_FAILED,
Admin.create_topic raises AuthorizationError naming the refused resource's code, a group
consumer refused its group raises GROUP_AUTHORIZATION_FAILED from poll, and `samsa topics
create` as bob prints one line naming the refusal and exits 1. Before, each retried the refused
call until its deadline (60 s of metadata reads, then NoBrokersAvailable). Metadata is answered
per topic: gina, who may DESCRIBE and WRITE orders only, writes to orders with the producer
whose sends to `hidden` (which exists) and to `nowhere` (which does not) fail at once with
AuthorizationError naming each, and whose send_many to `hidden` fails every record's future
rather than raise.

Method: 1 controller, 2 brokers, 1 coordinator started by acl_cluster.py (TLS and the authorizer
on, real processes stopped by PID also on failure); certificates issued from the cluster's CA
(cluster_tls.issue_client); no ACL is granted to bob or erin. Each test's body has
a 30 s pytest timeout, well under the SDK's deadlines it used to wait out: no timing asserts.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_cluster import acl_cluster, allow, as_client, grant, principal, super_user
from cluster_helpers import wait_until

from samsa.cli.cluster_tls import issue_client
from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    AuthorizationError,
    Consumer,
    ProduceError,
    Producer,
    TransactionFatalError,
)
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, ResourceType

pytestmark = pytest.mark.timeout(240)
BODY_TIMEOUT = pytest.mark.timeout(30, func_only=True)
SAMSA = Path(sys.executable).with_name("samsa")


TOPICS = {"orders": (1, 2), "hidden": (1, 1)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with acl_cluster(tmp_path_factory, "acl-errors-cluster", 1, 2, 1, TOPICS) as running:
        with Producer({**super_user(running), "acks": "all"}) as producer:
            producer.send("orders", b"o").result(timeout=30)
        yield running


@BODY_TIMEOUT
def test_bobs_records_fail_with_topic_authorization_failed(cluster: LocalCluster) -> None:
    config = {**as_client(cluster, "bob"), "max.block.ms": 60_000}
    with Producer(config) as producer, pytest.raises(ProduceError) as raised:
        producer.send("orders", b"x").result(timeout=60)
    assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, raised.value
    assert isinstance(raised.value, AuthorizationError) and raised.value.topic == "orders"


@BODY_TIMEOUT
def test_a_producer_refused_some_topics_fails_them_at_once_and_writes_the_others(
    cluster: LocalCluster,
) -> None:
    gina = principal("gina")
    grant(
        cluster,
        allow(gina, Operation.DESCRIBE, ResourceType.TOPIC, "orders"),
        allow(gina, Operation.WRITE, ResourceType.TOPIC, "orders"),
    )
    servers = [node.endpoint for node in (*cluster.spec.controllers, *cluster.spec.brokers)]

    def described_everywhere() -> bool:
        for server in servers:  # each applies the grant once it has replayed it
            config = {**as_client(cluster, "gina"), "bootstrap.servers": server}
            try:
                with Admin(config) as admin:
                    admin.describe_topics(["orders"])
            except AuthorizationError:
                return False
        return True

    wait_until("gina's grant applied by every server", described_everywhere)
    config = {**as_client(cluster, "gina"), "acks": "all", "max.block.ms": 60_000}
    with Producer(config) as producer:
        for topic in ("hidden", "nowhere"):
            error = producer.send(topic, b"x").exception(timeout=60)
            assert isinstance(error, AuthorizationError), (topic, error)
            assert (error.code, error.topic) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic)
            assert f"{gina} may not DESCRIBE topic {topic} (" in str(error)
        many = producer.send_many("hidden", [b"1", b"2", b"3"])
        assert many.failed_count(timeout=60) == 3
        assert isinstance(many.exception(timeout=0), AuthorizationError)
        assert producer.send("orders", b"g").result(timeout=60).offset >= 1


@BODY_TIMEOUT
def test_bobs_assign_is_refused_at_once(cluster: LocalCluster) -> None:
    """assign() reads the partitions' metadata (it checks they exist): refused DESCRIBE."""
    with (
        Consumer(as_client(cluster, "bob")) as consumer,
        pytest.raises(AuthorizationError) as raised,
    ):
        consumer.assign([("orders", 0)])
    assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, raised.value


def test_poll_raises_topic_authorization_failed(cluster: LocalCluster) -> None:
    """frank may DESCRIBE orders, not READ it: his fetch (or offset lookup) is refused."""
    grant(cluster, allow(principal("frank"), Operation.DESCRIBE, ResourceType.TOPIC, "orders"))
    config = {**as_client(cluster, "frank"), "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:

        def assigned() -> bool:
            try:
                consumer.assign([("orders", 0)])
            except AuthorizationError:  # the grant not yet applied where the consumer asked
                return False
            return True

        wait_until("frank's DESCRIBE applied", assigned)
        raised = polled_refusal(consumer)
    assert raised.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, raised
    assert "may not READ topic orders" in str(raised)


@BODY_TIMEOUT
def polled_refusal(consumer: Consumer) -> AuthorizationError:
    with pytest.raises(AuthorizationError) as raised:
        for _ in range(60):
            consumer.poll(1.0)
    return raised.value


@BODY_TIMEOUT
def test_bobs_create_topic_is_refused(cluster: LocalCluster) -> None:
    with Admin(as_client(cluster, "bob")) as admin, pytest.raises(AuthorizationError) as raised:
        admin.create_topic("bobs", 1, 1)
    assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, raised.value
    assert raised.value.resource == "topic:bobs"
    assert "may not CREATE topic bobs" in str(raised.value)


@BODY_TIMEOUT
def test_the_cli_prints_one_line_naming_the_refusal(cluster: LocalCluster, tmp_path: Path) -> None:
    properties = tmp_path / "bob.properties"
    properties.write_text(
        "".join(f"{key}={value}\n" for key, value in issue_client(cluster.data_dir, "bob").items())
    )
    created = subprocess.run(
        [
            *(str(SAMSA), "topics", "create", "bobs", "--partitions", "1"),
            *("--replication-factor", "1", "--bootstrap-server", cluster.spec.bootstrap_servers),
            *("--command-config", str(properties)),
        ],
        capture_output=True,
        text=True,
        timeout=25,
    )
    assert created.returncode == 1, created
    lines = created.stderr.strip().splitlines()
    assert len(lines) == 1, created.stderr
    assert "may not CREATE topic bobs" in lines[0], lines
    assert lines[0].endswith("(TOPIC_AUTHORIZATION_FAILED)"), lines


@BODY_TIMEOUT
def test_a_consumer_refused_its_group_raises_group_authorization_failed(
    cluster: LocalCluster,
) -> None:
    config = {**as_client(cluster, "erin"), "group.id": "erins", "auto.offset.reset": "earliest"}
    with Consumer(config) as consumer:
        consumer.subscribe(["orders"])
        with pytest.raises(AuthorizationError) as raised:
            for _ in range(60):
                consumer.poll(1.0)
    assert raised.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED, raised.value


@BODY_TIMEOUT
def test_a_refused_transactional_id_is_fatal(cluster: LocalCluster) -> None:
    config = {**as_client(cluster, "bob"), "transactional.id": "bobs-tx"}
    with Producer(config) as producer:
        with pytest.raises(AuthorizationError) as raised:
            producer.init_transactions(25)
        assert raised.value.code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, raised.value
        with pytest.raises(TransactionFatalError):  # the producer can only be closed
            producer.begin_transaction()

"""SASL/SCRAM end to end on a local cluster made as `samsa up --sasl --authorizer` makes one.

Goal: every process requires a login; a user made with Admin.alter_user_scram_credentials logs
in with the SDK (security.protocol=SASL_SSL) and is `User:<name>` for the ACLs of every process
(refused, then granted: produce, and consume in a group through the coordinator); the cluster's
own traffic (replication, registration, the coordinator's writes) goes on without any login; a
wrong password, and a client that does not log in at all, get AuthenticationError rather than a
wait for a timeout; deleting a user's credential ends the sessions it had at once (a stream it
keeps open too), and a new password starts a fresh one; the installed `samsa` CLI logs in as
admin from cluster.json.

Method: 1 controller, 2 brokers and 1 coordinator (real processes, TLS without client
certificates, SASL on, the authorizer with admin as super user, every process stopped by PID
also on failure) started by `local_cluster(..., sasl=True, authorizer=True)`; admin's password
is the one the launcher made (cluster_tls.ensure_sasl_credentials) and the controllers'
bootstrap file created. A change of ACLs or credentials is waited for, never slept on.
"""

from __future__ import annotations

import queue
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    AclBinding,
    Admin,
    AuthenticationError,
    AuthorizationError,
    Consumer,
    Producer,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from samsa.client.client_tls import client_security
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, PatternType, Permission, ResourceType
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(300)

SAMSA = Path(sys.executable).with_name("samsa")
RECORDS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("sasl-cluster")
    with local_cluster(data_dir, 1, 2, coordinators=1, sasl=True, authorizer=True) as running:
        with Admin(admin_config(running)) as admin:
            admin.create_topic("payments", 2, 2)
            set_password(admin, "alice", "alice-secret")
        yield running


def admin_config(cluster: LocalCluster) -> dict[str, object]:
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        **cluster.spec.client_security(cluster.data_dir),
    }


def login(cluster: LocalCluster, user: str, password: str) -> dict[str, object]:
    """A client's configuration logging in as `user` (SCRAM-SHA-256)."""
    return {
        **admin_config(cluster),
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def set_password(admin: Admin, user: str, password: str) -> None:
    change = UserScramCredentialUpsertion(user, ScramCredentialInfo("SCRAM-SHA-256"), password)
    assert admin.alter_user_scram_credentials([change]) == {user: None}


def allow(user: str, operation: Operation, resource_type: ResourceType, name: str) -> AclBinding:
    return AclBinding(
        resource_type, name, PatternType.LITERAL, f"User:{user}", "*", operation, Permission.ALLOW
    )


def test_a_user_logs_in_and_is_its_principal_for_the_acls(cluster: LocalCluster) -> None:
    alice = login(cluster, "alice", "alice-secret")
    with Producer({**alice, "acks": "all"}) as producer:
        refused = producer.send("payments", b"too early")
        with pytest.raises(AuthorizationError) as raised:
            refused.result(30)
        assert "User:alice may not" in str(raised.value), raised.value
    with Admin(admin_config(cluster)) as admin:
        bindings = [
            allow("alice", Operation.WRITE, ResourceType.TOPIC, "payments"),
            allow("alice", Operation.READ, ResourceType.TOPIC, "payments"),
            allow("alice", Operation.READ, ResourceType.GROUP, "alices"),
        ]
        assert set(admin.create_acls(bindings).values()) == {None}

    def produced() -> bool:
        with Producer({**alice, "acks": "all"}) as producer:
            futures = [producer.send("payments", b"p%d" % n) for n in range(RECORDS)]
            try:
                for future in futures:
                    future.result(30)
            except AuthorizationError:
                return False  # the grant has not reached the leader yet
        return True

    wait_until("alice's grants applied on the brokers", produced, timeout_s=60)
    consumer_config = {**alice, "group.id": "alices", "auto.offset.reset": "earliest"}
    with Consumer(consumer_config) as consumer:
        consumer.subscribe(["payments"])
        values: set[bytes] = set()

        def read_all() -> bool:
            values.update(record.value for record in consumer.poll(1.0))
            return len(values) >= RECORDS

        wait_until("alice reads payments in her group", read_all, timeout_s=60)
        consumer.commit()
    assert values == {b"p%d" % n for n in range(RECORDS)}


def test_a_wrong_password_or_no_login_is_refused_at_once(cluster: LocalCluster) -> None:
    with Admin(login(cluster, "alice", "wrong")) as admin, pytest.raises(AuthenticationError) as e:
        admin.list_topics()
    assert "alice" in str(e.value) and "SCRAM-SHA-256" in str(e.value), e.value
    with (
        Admin(login(cluster, "nobody", "alice-secret")) as admin,
        pytest.raises(AuthenticationError),
    ):
        admin.list_topics()
    plain_tls = {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": admin_config(cluster)["ssl.ca.location"],
    }
    with Admin(plain_tls) as admin, pytest.raises(AuthenticationError) as e:
        admin.list_topics()
    assert "requires SASL" in str(e.value), e.value


def test_deleting_a_credential_ends_its_sessions(cluster: LocalCluster) -> None:
    with Admin(admin_config(cluster)) as admin:
        set_password(admin, "bob", "bob-secret")
        bob = Admin(login(cluster, "bob", "bob-secret"))
        try:
            wait_until("bob logged in", lambda: bob.describe_cluster().brokers)
            deletion = UserScramCredentialDeletion("bob", "SCRAM-SHA-256")
            assert admin.alter_user_scram_credentials([deletion]) == {"bob": None}

            def refused() -> bool:
                try:
                    bob.describe_cluster()
                except AuthenticationError:
                    return True
                return False  # the deletion has not reached the controller's image yet

            wait_until("bob's session ended by the deletion", refused)
            set_password(admin, "bob", "bob-new")
            renewed = Admin(login(cluster, "bob", "bob-new"))
            try:
                wait_until("bob's new password", lambda: renewed.describe_cluster().brokers)
            finally:
                renewed.close()
        finally:
            bob.close()


def test_deleting_a_credential_ends_an_open_stream(cluster: LocalCluster) -> None:
    """A stream is authenticated as it opens; its credential is checked again at each message,
    so the deletion ends a FetchStream carol keeps open, not only her next call."""
    with Admin(admin_config(cluster)) as admin:
        set_password(admin, "carol", "carol-secret")
        grant = allow("carol", Operation.READ, ResourceType.TOPIC, "payments")
        assert set(admin.create_acls([grant]).values()) == {None}
        security = client_security(login(cluster, "carol", "carol-secret"))
        assert security is not None
        channel = grpc.secure_channel(
            cluster.spec.brokers[0].endpoint, security.channel_credentials()
        )
        requests: queue.Queue[broker_pb2.FetchStreamRequest | None] = queue.Queue()
        try:
            stub = broker_pb2_grpc.BrokerServiceStub(channel)
            answers = stub.FetchStream(iter(requests.get, None), timeout=120)

            def fetched() -> broker_pb2.FetchResponse:
                requests.put(broker_pb2.FetchStreamRequest(request=fetch_request("payments")))
                return next(answers).response

            first = fetched()
            assert first.topics[0].partitions[0].error_code != ErrorCode.SASL_AUTHENTICATION_FAILED
            deletion = UserScramCredentialDeletion("carol", "SCRAM-SHA-256")
            assert admin.alter_user_scram_credentials([deletion]) == {"carol": None}

            def ended() -> grpc.RpcError | None:
                try:
                    fetched()
                except grpc.RpcError as error:
                    return error
                return None  # the broker has not replayed the deletion yet

            error = wait_until("carol's open stream ended by the deletion", ended)
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error  # type: ignore[attr-defined]
            assert "deleted or replaced" in (error.details() or ""), error  # type: ignore[attr-defined]
        finally:
            requests.put(None)
            channel.close()


def fetch_request(topic: str) -> broker_pb2.FetchRequest:
    partition = broker_pb2.FetchRequest.PartitionData(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 16
    )
    data = broker_pb2.FetchRequest.TopicData(name=topic, partitions=[partition])
    return broker_pb2.FetchRequest(replica_id=-1, max_bytes=1 << 16, topics=[data])


def test_the_cli_logs_in_as_admin_from_cluster_json(cluster: LocalCluster) -> None:
    done = subprocess.run(
        [str(SAMSA), "topics", "list", "--data-dir", str(cluster.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "payments" in done.stdout.split()

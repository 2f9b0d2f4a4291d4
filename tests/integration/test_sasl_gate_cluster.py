"""SASL on in every process of a real TLS cluster: the cluster's own calls still pass, clients'
calls without a ticket do not.

Goal: with sasl.enabled.mechanisms set on a controller, a broker and a coordinator, the broker
and the coordinator still register and stay unfenced (their registration, heartbeats and
metadata fetches carry the membership proof, which the SASL gate lets through); a client call
without a ticket (or with a forged one) is refused by each process with UNAUTHENTICATED and
`samsa-error-code: 58`, even with the cluster's client certificate; health checks need no
ticket; and every process serves SaslService, answering an unknown user with server-first and
then SASL_AUTHENTICATION_FAILED, with the same salt on every process (the decoy key derives from
the cluster secret), so that asking around does not tell who has an account.

Method: 1 controller, 1 broker and 1 coordinator started by the launcher with TLS, and SASL
turned on through SAMSA_SASL_ENABLED_MECHANISMS in the environment they inherit (real
processes, stopped by PID also on failure). The cluster's health is read with a membership
proof made from its secret, since the launcher's own check carries no ticket. Credentials
cannot be stored yet (the controller's AlterUserScramCredentials comes with another change), so
a successful exchange is covered by tests/unit/runtime/test_sasl_adapter.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, wait_until
from grpc_health.v1 import health_pb2, health_pb2_grpc

from samsa.cli.launcher import LocalCluster, load_or_create
from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.common.tls import TlsSettings
from samsa.services.runtime import membership, sasl_tickets
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.secret import load_secret
from samsa.v1 import (
    controller_pb2,
    controller_pb2_grpc,
    coordinator_pb2,
    coordinator_pb2_grpc,
    security_pb2,
    security_pb2_grpc,
)

pytestmark = pytest.mark.timeout(180)

DESCRIBE_CLUSTER = "/samsa.v1.ControllerService/DescribeCluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("sasl-cluster")
    before = os.environ.get("SAMSA_SASL_ENABLED_MECHANISMS")
    os.environ["SAMSA_SASL_ENABLED_MECHANISMS"] = "SCRAM-SHA-256"
    try:
        spec = load_or_create(data_dir, 1, 1, FAST_SETTINGS, coordinators=1, tls=True)
        running = LocalCluster(spec, data_dir)
        try:
            running.start_all()
            yield running
        finally:
            running.stop_all()
    finally:
        if before is None:
            os.environ.pop("SAMSA_SASL_ENABLED_MECHANISMS", None)
        else:
            os.environ["SAMSA_SASL_ENABLED_MECHANISMS"] = before


def channel(cluster: LocalCluster, endpoint: str) -> grpc.Channel:
    security = TlsSettings.from_client_config(cluster.spec.client_security(cluster.data_dir))
    assert security is not None
    return grpc.secure_channel(endpoint, security.channel_credentials())


def endpoints(cluster: LocalCluster) -> list[str]:
    spec = cluster.spec
    return [spec.controllers[0].endpoint, spec.brokers[0].endpoint, spec.coordinators[0].endpoint]


def member_view(cluster: LocalCluster) -> controller_pb2.DescribeClusterResponse | None:
    """The controller's DescribeCluster, asked as a member; None until the broker and the
    coordinator are registered and unfenced (or the controller answers at all)."""
    key = membership.derive_key(load_secret(cluster.data_dir / "cluster.secret"))
    with channel(cluster, cluster.spec.controllers[0].endpoint) as open_channel:
        stub = controller_pb2_grpc.ControllerServiceStub(open_channel)
        try:
            answer = stub.DescribeCluster(
                controller_pb2.DescribeClusterRequest(),
                metadata=MemberSigner(key, 1).metadata(DESCRIBE_CLUSTER),
                timeout=2,
            )
        except grpc.RpcError:
            return None
    brokers = [b for b in answer.brokers if not b.is_fenced]
    coordinators = [c for c in answer.coordinators if not c.is_fenced]
    return answer if brokers and coordinators else None


def test_members_register_through_the_gate(cluster: LocalCluster) -> None:
    answer = wait_until("broker and coordinator registered", lambda: member_view(cluster), 60)
    assert [b.broker_id for b in answer.brokers] == [1]
    assert cluster.exited() == {}


def refusal(call: grpc.UnaryUnaryMultiCallable, request: object, metadata=()) -> tuple[str, str]:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, metadata=metadata, timeout=5)
    error: grpc.Call = refused.value  # type: ignore[assignment]
    return error.code().name, dict(error.trailing_metadata() or ()).get("samsa-error-code", "")


def test_every_process_refuses_a_client_without_a_ticket(cluster: LocalCluster) -> None:
    wait_until("cluster formed", lambda: member_view(cluster), 60)
    controller, broker, coordinator = endpoints(cluster)
    forged = ((sasl_tickets.METADATA_KEY, "AAAA" * 30),)
    for endpoint in (controller, broker):
        with channel(cluster, endpoint) as open_channel:
            describe = controller_pb2_grpc.ControllerServiceStub(open_channel).DescribeCluster
            request = controller_pb2.DescribeClusterRequest()
            assert refusal(describe, request) == ("UNAUTHENTICATED", "58"), endpoint
            assert refusal(describe, request, forged) == ("UNAUTHENTICATED", "58"), endpoint
    with channel(cluster, coordinator) as open_channel:
        find = coordinator_pb2_grpc.CoordinatorLookupServiceStub(open_channel).FindCoordinator
        request = coordinator_pb2.FindCoordinatorRequest(keys=["g"])
        assert refusal(find, request) == ("UNAUTHENTICATED", "58")


def test_health_checks_need_no_ticket(cluster: LocalCluster) -> None:
    wait_until("cluster formed", lambda: member_view(cluster), 60)
    for endpoint in endpoints(cluster):
        with channel(cluster, endpoint) as open_channel:
            answer = health_pb2_grpc.HealthStub(open_channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, endpoint


def unknown_user_exchange(cluster: LocalCluster, endpoint: str) -> tuple[str, int, str]:
    """(the salt server-first shows, the final error code, its message) for user 'nobody'."""
    client = scram.ScramClient(scram.SCRAM_SHA_256, "nobody", "guess", "client-nonce")
    pending = [
        security_pb2.SaslAuthenticateRequest(
            mechanism="SCRAM-SHA-256", auth_bytes=client.client_first()
        )
    ]
    answers = []
    with channel(cluster, endpoint) as open_channel:
        stub = security_pb2_grpc.SaslServiceStub(open_channel)
        for answer in stub.SaslAuthenticate(_Feeder(pending), timeout=10):
            answers.append(answer)
            if len(answers) == 1:  # the second message depends on the first answer
                final = client.client_final(answer.auth_bytes)
                pending.append(security_pb2.SaslAuthenticateRequest(auth_bytes=final))
    salt = dict(part.split("=", 1) for part in answers[0].auth_bytes.decode().split(","))["s"]
    return salt, answers[-1].error_code, answers[-1].error_message


class _Feeder:
    """A request iterator that waits for the next message the test appends (gRPC's sync API
    reads it in a thread of its own)."""

    def __init__(self, pending: list[security_pb2.SaslAuthenticateRequest]) -> None:
        self.pending = pending
        self.sent = 0

    def __iter__(self) -> _Feeder:
        return self

    def __next__(self) -> security_pb2.SaslAuthenticateRequest:
        if self.sent == 2:
            raise StopIteration
        wait_until("the next SASL message", lambda: self.pending or None, 10)
        self.sent += 1
        return self.pending.pop()


def test_an_unknown_user_looks_the_same_on_every_process(cluster: LocalCluster) -> None:
    wait_until("cluster formed", lambda: member_view(cluster), 60)
    answers = [unknown_user_exchange(cluster, endpoint) for endpoint in endpoints(cluster)]
    assert len({salt for salt, _, _ in answers}) == 1
    for _, code, message in answers:
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert message.startswith("authentication failed: invalid user name or password")


def test_no_process_exited(cluster: LocalCluster) -> None:
    assert cluster.exited() == {}

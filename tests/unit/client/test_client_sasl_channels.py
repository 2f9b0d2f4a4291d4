"""Goal: an SDK client with security.protocol=SASL_SSL logs in once and carries its session
ticket on every call, on its sync and its grpc.aio channels alike: the ticket arrives with each
call, one SCRAM exchange serves many calls (concurrent ones too), and a login the cluster refuses
(a wrong password, a mechanism it does not enable, a server that cannot prove the credential)
reaches the application as an AuthenticationError at once (the CLI says so in one line); a
ticket the server refuses is dropped, so that the next call logs in afresh.

Method: one real gRPC server in this process on a TLS port of 127.0.0.1 (sdk_sasl_fakes.py):
SaslService running common.scram.ScramServer over a dict of credentials and answering a fixed
ticket, a fake controller and a fake broker behind a gate that refuses calls without it
(UNAUTHENTICATED, samsa-error-code 58). The clients are the SDK's own Channels, AioChannels,
Admin and Producer, and the `samsa` CLI with a --command-config file; the server's ledger
counts exchanges and records each call's ticket.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from sdk_sasl_fakes import LIFETIME_MS, TICKET, serving_sasl
from sdk_tls_fakes import CLUSTER_ID, Certificates, client_config, fetch_request, make_certificates

from samsa.cli.main import main as cli_main
from samsa.client import (
    Admin,
    AuthenticationError,
    Consumer,
    ProduceError,
    Producer,
)
from samsa.client.channels import AioChannels, Channels
from samsa.client.client_tls import client_security
from samsa.client.refusals import authorization_error
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2, broker_pb2_grpc

NOWHERE = "127.0.0.1:1"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("sasl"))


def sasl_config(
    endpoint: str, ca: Path, password: str = "alice-secret", mechanism: str = "SCRAM-SHA-256"
) -> dict[str, object]:
    return client_config(endpoint, ca) | {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": password,
    }


def sync_fetch(channel: grpc.Channel) -> broker_pb2.FetchResponse:
    return broker_pb2_grpc.BrokerServiceStub(channel).Fetch(fetch_request(), timeout=10)


async def aio_fetches(channels: AioChannels, endpoint: str, count: int) -> None:
    try:
        stub = broker_pb2_grpc.BrokerServiceStub(channels.get(endpoint))
        for _ in range(count):
            await stub.Fetch(fetch_request(), timeout=10)
    finally:
        await channels.close()


async def driver_fetch(channels: AioChannels, endpoint: str) -> None:
    """A fetch on a driver's own channel (opened on the driver's loop)."""
    channel = channels.get(endpoint, traced=False)
    await broker_pb2_grpc.BrokerServiceStub(channel).Fetch(fetch_request(), timeout=10)


def refused_as(call: grpc.RpcError) -> AuthenticationError:
    """The SDK's reading of a failed call: an AuthenticationError, or the test fails."""
    error = authorization_error(call)
    assert isinstance(error, AuthenticationError), (call, error)
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED and not error.retriable
    return error


def test_one_exchange_serves_the_sync_and_the_aio_calls_of_a_client(
    certificates: Certificates,
) -> None:
    with serving_sasl(certificates) as served:
        security = client_security(sasl_config(NOWHERE, certificates.ca))
        channels = Channels(security=security)
        try:
            for _ in range(3):
                sync_fetch(channels.get(served.endpoint))
            asyncio.run(aio_fetches(AioChannels(security), served.endpoint, 3))
        finally:
            channels.close()
        assert served.ledger.tickets == [TICKET] * 6
        assert served.broker.calls == 6
        assert served.ledger.exchanges == 1


def test_concurrent_first_calls_wait_for_one_exchange(certificates: Certificates) -> None:
    with serving_sasl(certificates) as served:
        channels = Channels(security=client_security(sasl_config(NOWHERE, certificates.ca)))
        try:
            channel = channels.get(served.endpoint)
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda _: sync_fetch(channel), range(16)))
        finally:
            channels.close()
        assert served.ledger.tickets == [TICKET] * 16
        assert served.ledger.exchanges == 1


def test_a_producers_sync_and_driver_channels_share_its_login(
    certificates: Certificates,
) -> None:
    with serving_sasl(certificates) as served:
        producer = Producer(sasl_config(NOWHERE, certificates.ca))
        try:
            sync_fetch(producer._channels.get(served.endpoint))
            on_loop = driver_fetch(producer._driver._channels, served.endpoint)  # type: ignore[attr-defined]
            asyncio.run_coroutine_threadsafe(on_loop, producer._loop).result(10)
        finally:
            producer.close(timeout=1)
        assert served.ledger.tickets == [TICKET] * 2
        assert served.ledger.exchanges == 1


def test_an_admin_logs_in_and_reads_the_cluster(certificates: Certificates) -> None:
    with serving_sasl(certificates) as served:
        with Admin(sasl_config(served.endpoint, certificates.ca)) as admin:
            assert admin.describe_cluster().cluster_id == CLUSTER_ID
        assert served.ledger.tickets == [TICKET]


@pytest.mark.parametrize(
    ("password", "mechanism", "forge_final", "named"),
    [
        ("wrong", "SCRAM-SHA-256", False, "invalid credentials"),
        ("alice-secret", "SCRAM-SHA-512", False, "enabled: SCRAM-SHA-256"),
        ("alice-secret", "SCRAM-SHA-256", True, "does not hold the credential"),
    ],
    ids=["wrong password", "mechanism not enabled", "server cannot prove the credential"],
)
def test_a_refused_login_is_an_authentication_error_at_once(
    certificates: Certificates, password: str, mechanism: str, forge_final: bool, named: str
) -> None:
    with serving_sasl(certificates, forge_final=forge_final) as served:
        config = sasl_config(served.endpoint, certificates.ca, password, mechanism)
        channels = Channels(security=client_security(config))
        try:
            with pytest.raises(grpc.RpcError) as failed:
                sync_fetch(channels.get(served.endpoint))
        finally:
            channels.close()
        error = refused_as(failed.value)
        assert "SASL authentication failed for user 'alice'" in str(error)
        assert named in str(error)
        # An Admin with a long deadline raises it at once rather than retrying until then.
        admin = Admin(config | {"default.api.timeout.ms": 600_000})
        with admin, pytest.raises(AuthenticationError, match=named):
            admin.describe_cluster()
        assert served.ledger.tickets == []  # no call went out without a ticket
        assert served.broker.calls == served.controller.calls == 0


def test_an_aio_call_of_a_refused_login_is_an_authentication_error(
    certificates: Certificates,
) -> None:
    with serving_sasl(certificates) as served:
        security = client_security(sasl_config(NOWHERE, certificates.ca, "wrong"))
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            asyncio.run(aio_fetches(AioChannels(security), served.endpoint, 1))
        refused_as(failed.value)
        assert served.ledger.failed_exchanges == 1


def test_a_refused_ticket_is_dropped_and_the_next_call_logs_in_again(
    certificates: Certificates,
) -> None:
    with serving_sasl(certificates) as served:
        security = client_security(sasl_config(NOWHERE, certificates.ca))
        assert security is not None and security.login is not None
        channels = Channels(security=security)
        try:
            sync_fetch(channels.get(served.endpoint))
            served.ledger.valid_tickets.clear()  # revoked, as a replaced credential's
            with pytest.raises(grpc.RpcError) as refused:
                sync_fetch(channels.get(served.endpoint))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
            refused_as(refused.value)
            assert security.login.state.session is None
            served.ledger.valid_tickets.add(TICKET)
            sync_fetch(channels.get(served.endpoint))
        finally:
            channels.close()
        assert served.ledger.exchanges == 2
        assert security.login.state.session is not None
        assert LIFETIME_MS > 0


@pytest.mark.parametrize("password", ["alice-secret", "wrong"])
def test_the_cli_logs_in_with_its_command_config(
    certificates: Certificates,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    password: str,
) -> None:
    properties = tmp_path / "client.properties"
    lines = sasl_config(NOWHERE, certificates.ca, password)
    del lines["bootstrap.servers"]
    properties.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    with serving_sasl(certificates) as served:
        argv = ["cluster", "--bootstrap-server", served.endpoint]
        status = cli_main([*argv, "--command-config", str(properties)])
        if password == "wrong":
            assert status == 1
            assert "SASL authentication failed for user 'alice'" in capsys.readouterr().err
            assert served.ledger.tickets == []
        else:
            assert served.ledger.tickets and set(served.ledger.tickets) == {TICKET}
            assert served.controller.calls >= 1


def test_a_refused_login_fails_a_records_future_and_a_consumers_poll(
    certificates: Certificates,
) -> None:
    with serving_sasl(certificates) as served:
        config = sasl_config(served.endpoint, certificates.ca, "wrong")
        producer = Producer(config | {"delivery.timeout.ms": 600_000, "max.block.ms": 600_000})
        try:
            with pytest.raises(AuthenticationError) as refused:
                producer.send("t", b"v").result(600)
            assert isinstance(refused.value, ProduceError)
        finally:
            producer.close(timeout=1)
        for group in ({"group.id": "g"}, {}):
            consumer = Consumer(config | group)
            try:
                with pytest.raises(AuthenticationError, match="SASL authentication failed"):
                    if group:  # the group's heartbeat fails: poll() raises it
                        consumer.subscribe(["t"])
                    else:  # assign() reads the topic's metadata: it raises it
                        consumer.assign([("t", 0)])
                    consumer.poll(600)
            finally:
                consumer.close()
        assert served.ledger.tickets == []

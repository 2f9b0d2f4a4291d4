"""Goal: an SDK client with security.protocol=SSL speaks TLS on every channel it opens: the sync
channels (metadata, admin) and the grpc.aio channels of the producer's and the consumer's drivers,
each client handing its drivers the TLS it read once; with ssl.client.auth=required on the server
a client with a certificate of the cluster's CA gets through and one without fails; a client
trusting another CA fails. Failures surface as the SDK's transport errors (KafkaError from the
Admin, UNAVAILABLE from a raw call), fast, not as a hang.

Method: one real gRPC server in this process, serving a fake controller and a fake broker on a
TLS port of 127.0.0.1 (sdk_tls_fakes.py, certificates from samsa.cli.certificates in tmp_path);
the clients are the SDK's own, dialling it as they would a cluster; the fakes count the calls
that got through. Short request timeouts bound every failing call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from sdk_tls_fakes import (
    CLUSTER_ID,
    Certificates,
    client_config,
    fetch_request,
    make_certificates,
    serving_tls,
)

from samsa.client import Admin, AsyncConsumer, AsyncProducer, Consumer, Producer
from samsa.client.channels import AioChannels
from samsa.client.client_tls import client_security
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.errors import KafkaError
from samsa.client.partition_range import PartitionRangeReader
from samsa.v1 import broker_pb2, broker_pb2_grpc

SHORT = {"request.timeout.ms": 300, "default.api.timeout.ms": 900}
NOWHERE = "127.0.0.1:1"  # the bootstrap of clients that are only asked to dial the fake


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def admin_cluster_id(endpoint: str, ca: Path, identity: tuple[Path, Path] | None = None) -> str:
    with Admin(client_config(endpoint, ca, identity) | SHORT) as admin:
        return admin.describe_cluster().cluster_id


def sync_fetch(channel: grpc.Channel) -> broker_pb2.FetchResponse:
    return broker_pb2_grpc.BrokerServiceStub(channel).Fetch(fetch_request(), timeout=5)


async def aio_fetch(channel: grpc.aio.Channel) -> broker_pb2.FetchResponse:
    return await broker_pb2_grpc.BrokerServiceStub(channel).Fetch(fetch_request(), timeout=5)


async def driver_fetch(channels: AioChannels, endpoint: str) -> None:
    """A fetch on a driver's own channel to `endpoint` (opened on the driver's loop)."""
    await aio_fetch(channels.get(endpoint, traced=False))


def test_an_admin_reaches_a_tls_controller(certificates: Certificates) -> None:
    with serving_tls(certificates) as served:
        assert admin_cluster_id(served.endpoint, certificates.ca) == CLUSTER_ID
        assert served.controller.calls == 1


class OneBroker:
    """The metadata a consumer driver needs to dial one broker."""

    bootstrap = (NOWHERE,)

    def __init__(self, endpoint: str) -> None:
        self.endpoints = {1: endpoint}

    def keep(self, topics: object) -> None:
        pass


def consumer_driver(endpoint: str, config: dict[str, object]) -> ConsumerDriver:
    """A consumer driver given the TLS a consumer would read from `config`."""
    parsed = ConsumerConfig.from_dict(config)
    return ConsumerDriver(parsed, OneBroker(endpoint), lambda: None, client_security(config))  # type: ignore[arg-type]


def test_a_consumer_drivers_aio_channels_speak_tls(certificates: Certificates) -> None:
    with serving_tls(certificates) as served:
        driver = consumer_driver(served.endpoint, client_config(NOWHERE, certificates.ca))

        fetch_and_close(driver, served.endpoint)
        assert served.broker.calls == 1


def fetch_and_close(driver: ConsumerDriver, endpoint: str) -> None:
    async def fetch() -> None:
        try:
            await driver_fetch(driver._channels, endpoint)
        finally:
            await driver._channels.close()

    asyncio.run(fetch())


@pytest.mark.parametrize("make", [Producer, Consumer], ids=["Producer", "Consumer"])
def test_a_producer_and_a_consumer_dial_with_their_tls_on_both_channel_kinds(
    certificates: Certificates, make: type[Producer] | type[Consumer]
) -> None:
    with serving_tls(certificates) as served:
        client = make(client_config(NOWHERE, certificates.ca))
        try:
            sync_fetch(client._channels.get(served.endpoint))
            on_loop = driver_fetch(client._driver._channels, served.endpoint)  # type: ignore[attr-defined]
            asyncio.run_coroutine_threadsafe(on_loop, client._loop).result(10)
        finally:
            client.close(timeout=1)
        assert served.broker.calls == 2


@pytest.mark.parametrize(
    "make", [AsyncProducer, AsyncConsumer], ids=["AsyncProducer", "AsyncConsumer"]
)
def test_the_asyncio_clients_dial_with_their_tls_on_both_channel_kinds(
    certificates: Certificates, make: type[AsyncProducer] | type[AsyncConsumer]
) -> None:
    async def both(endpoint: str) -> None:
        async with make(client_config(NOWHERE, certificates.ca)) as client:
            await asyncio.to_thread(sync_fetch, client._channels.get(endpoint))
            assert client._driver is not None
            await aio_fetch(client._driver._channels.get(endpoint, traced=False))

    with serving_tls(certificates) as served:
        asyncio.run(both(served.endpoint))
        assert served.broker.calls == 2


def test_the_spark_range_reader_dials_with_its_tls(certificates: Certificates) -> None:
    with serving_tls(certificates) as served:
        with PartitionRangeReader(client_config(NOWHERE, certificates.ca)) as reader:
            sync_fetch(reader._channels.get(served.endpoint))
        assert served.broker.calls == 1


def test_with_client_auth_required_a_client_certificate_of_the_cluster_ca_gets_through(
    certificates: Certificates,
) -> None:
    with serving_tls(certificates, client_auth="required") as served:
        cluster_id = admin_cluster_id(served.endpoint, certificates.ca, certificates.client)
        assert cluster_id == CLUSTER_ID
        config = client_config(NOWHERE, certificates.ca, certificates.client)
        driver = consumer_driver(served.endpoint, config)

        fetch_and_close(driver, served.endpoint)
        assert (served.controller.calls, served.broker.calls) == (1, 1)


@pytest.mark.parametrize("identity", ["none", "another CA's"])
def test_with_client_auth_required_a_client_without_a_cluster_certificate_fails(
    certificates: Certificates, identity: str
) -> None:
    presented = None if identity == "none" else certificates.stranger
    with serving_tls(certificates, client_auth="required") as served:
        with pytest.raises(KafkaError):
            admin_cluster_id(served.endpoint, certificates.ca, presented)
        driver = consumer_driver(
            served.endpoint, client_config(NOWHERE, certificates.ca, presented)
        )

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            fetch_and_close(driver, served.endpoint)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert (served.controller.calls, served.broker.calls) == (0, 0)


def test_a_client_trusting_another_ca_fails(certificates: Certificates) -> None:
    with serving_tls(certificates) as served:
        with pytest.raises(KafkaError):
            admin_cluster_id(served.endpoint, certificates.other_ca)
        consumer = Consumer(client_config(NOWHERE, certificates.other_ca))
        with consumer, pytest.raises(grpc.RpcError) as refused:
            sync_fetch(consumer._channels.get(served.endpoint))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        assert served.controller.calls == served.broker.calls == 0


def test_a_plaintext_client_does_not_reach_a_tls_server(certificates: Certificates) -> None:
    with serving_tls(certificates) as served:
        admin = Admin({"bootstrap.servers": served.endpoint} | SHORT)
        with admin, pytest.raises(KafkaError):
            admin.describe_cluster()
        assert served.controller.calls == 0

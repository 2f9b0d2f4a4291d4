"""Goal: the internal listener (runtime/listeners.py) is configured, carried and used as
documented: `internal.listeners` / `internal.advertised.listeners` parse and refuse incoherent
settings with one line; a member's registration of its internal endpoint survives the metadata
log and its snapshot, and the cluster's own clients dial it (falling back to the public endpoint
without one); a member that dials the controllers' internal listeners follows NOT_CONTROLLER
redirects there; and a `Listeners` serves the same servicers on both ports, each with its own
connection bound (the public one max.connections, the internal one not).

Method: the pure config resolver and replay/snapshot functions; a ControllerChannel over fake
stubs; one grpc.aio Listeners on loopback ports for the serving part.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import grpc
import pytest

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.replay import replay
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.services.controller.controller_config import ControllerConfig, Peer, parse_voters
from samsa.services.coordinator.ownership import leader_endpoint
from samsa.services.runtime import config
from samsa.services.runtime.config import ConfigError, Setting
from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.services.runtime.listeners import Listeners
from samsa.services.runtime.member_auth import MemberSigner
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc
from samsa.v1 import metadata_pb2 as m

CONTROLLER_REQUIRED = {
    "node.id": "1",
    "listeners": "127.0.0.1:9090",
    "raft.address": "127.0.0.1:9190",
    "metadata.log.dir": "/data",
    "cluster.secret.file": "/run/secret",
}


def controller(**values: str) -> ControllerConfig:
    settings = {
        name: Setting(text, "test", name) for name, text in (CONTROLLER_REQUIRED | values).items()
    }
    return config.resolve(ControllerConfig, flags={}, environment={}, file=settings)


# --- configuration -------------------------------------------------------------------------


def test_without_internal_listeners_there_is_one_listener() -> None:
    settings = controller()
    assert settings.internal_listeners is None
    assert settings.internal_advertised_listener is None


def test_internal_listeners_and_their_advertised_address() -> None:
    settings = controller(**{"internal.listeners": "127.0.0.1:9091"})
    assert settings.internal_advertised_listener == "127.0.0.1:9091"
    advertised = controller(
        **{"internal.listeners": "0.0.0.0:9091", "internal.advertised.listeners": "c1:9091"}
    )
    assert (advertised.internal_listeners, advertised.internal_advertised_listener) == (
        "0.0.0.0:9091",
        "c1:9091",
    )
    # an empty value is "off", as for metrics.listen
    assert controller(**{"internal.listeners": ""}).internal_listeners is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"internal.listeners": "9091"}, r"internal\.listeners must be host:port"),
        (
            {"internal.listeners": "0.0.0.0:9091"},
            r"internal\.listeners='0\.0\.0\.0:9091' binds every interface, so "
            r"internal\.advertised\.listeners must say",
        ),
        (
            {"internal.listeners": "127.0.0.1:9091", "internal.advertised.listeners": "[::]:1"},
            r"internal\.advertised\.listeners must be host:port with a host others can reach",
        ),
        (
            {"internal.advertised.listeners": "c1:9091"},
            r"internal\.advertised\.listeners is set without internal\.listeners",
        ),
        (
            {"internal.listeners": "127.0.0.1:9090"},
            r"internal\.listeners='127\.0\.0\.1:9090' has the port of listeners",
        ),
        (
            {
                "listeners": "0.0.0.0:9090",
                "advertised.listeners": "c1:9090",
                "internal.listeners": "10.0.0.1:9090",
            },
            r"the internal listener needs a port of its own",
        ),
    ],
)
def test_incoherent_internal_settings_are_refused_in_one_line(
    values: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        controller(**values)
    assert "\n" not in str(refused.value)


def test_the_same_port_on_two_addresses_is_two_listeners() -> None:
    settings = controller(**{"listeners": "10.0.0.1:9090", "internal.listeners": "10.0.1.1:9090"})
    assert settings.internal_advertised_listener == "10.0.1.1:9090"


def test_voters_may_name_each_controllers_internal_listener() -> None:
    assert parse_voters("1=h1:9190@h1:9090@h1:9091,2=h2:9190@h2:9090") == (
        Peer(1, "h1:9190", "h1:9090", "h1:9091"),
        Peer(2, "h2:9190", "h2:9090", ""),
    )
    with pytest.raises(config.ValueProblem, match=r"@internal-host:port"):
        parse_voters("1=h1:9190@h1:9090@h1:9091@h1:9092")
    with pytest.raises(config.ValueProblem):
        parse_voters("1=h1:9190@h1:9090@0.0.0.0:9091")


# --- the metadata that carries it, and the clients that dial it -----------------------------


TOPIC_ID = bytes(range(16))


def _registrations() -> list[m.MetadataRecord]:
    return [
        m.MetadataRecord(
            register_broker=m.RegisterBrokerRecord(
                broker_id=1, incarnation_id="a", endpoint="b1:9092", internal_endpoint="b1:9093"
            )
        ),
        m.MetadataRecord(
            register_broker=m.RegisterBrokerRecord(
                broker_id=2, incarnation_id="b", endpoint="b2:9092"
            )
        ),
        m.MetadataRecord(unfence_broker=m.UnfenceBrokerRecord(broker_id=1, broker_epoch=0)),
        m.MetadataRecord(unfence_broker=m.UnfenceBrokerRecord(broker_id=2, broker_epoch=1)),
        m.MetadataRecord(topic=m.TopicRecord(name="t", topic_id=TOPIC_ID)),
        m.MetadataRecord(
            partition=m.PartitionRecord(
                topic_id=TOPIC_ID, partition=0, replicas=[1, 2], isr=[1, 2], leader=1
            )
        ),
        m.MetadataRecord(
            partition=m.PartitionRecord(
                topic_id=TOPIC_ID, partition=1, replicas=[2, 1], isr=[2, 1], leader=2
            )
        ),
        m.MetadataRecord(
            register_coordinator=m.RegisterCoordinatorRecord(
                coordinator_id=7,
                incarnation_id="c",
                endpoint="k7:9094",
                internal_endpoint="k7:9095",
            )
        ),
    ]


def _image() -> MetadataImage:
    image = MetadataImage.empty()
    batch = m.MetadataRecordBatch(base_offset=0, previous_hash=image.hash)
    batch.records.extend(_registrations())
    return replay(image, batch)


def test_registrations_carry_the_internal_endpoint_through_the_log_and_a_snapshot() -> None:
    image = _image()
    assert image.brokers[1].internal_endpoint == "b1:9093"
    assert image.brokers[1].member_endpoint == "b1:9093"
    assert image.brokers[1].endpoint == "b1:9092"  # clients still get the public one
    assert image.brokers[2].member_endpoint == "b2:9092"  # no internal listener: public
    assert image.coordinators[7].member_endpoint == "k7:9095"
    again = from_snapshot(to_snapshot(image))
    assert again.brokers == image.brokers
    assert again.coordinators == image.coordinators


def test_coordinators_dial_a_leaders_internal_listener_when_it_has_one() -> None:
    image = _image()
    assert leader_endpoint(image, "t", 0) == "b1:9093"
    assert leader_endpoint(image, "t", 1) == "b2:9092"


# --- redirects -----------------------------------------------------------------------------

PUBLIC_A, PUBLIC_B, PUBLIC_C = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
INTERNAL_A, INTERNAL_B, INTERNAL_C = "127.0.0.1:11", "127.0.0.1:12", "127.0.0.1:13"


class Stub:
    """A controller's stub: active (answers) or not (NOT_CONTROLLER naming controller 2 by
    both its endpoints)."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.calls = 0

    async def BrokerHeartbeat(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self.calls += 1
        response = c.BrokerHeartbeatResponse()
        if not self.active:
            response.status.error_code = ErrorCode.NOT_CONTROLLER  # type: ignore[assignment]
            response.status.active_controller.node_id = 2
            response.status.active_controller.endpoint = PUBLIC_B
            response.status.active_controller.internal_endpoint = INTERNAL_B
        return response


@pytest.mark.parametrize(
    ("bootstrap", "target"),
    [
        ((INTERNAL_A, INTERNAL_C, INTERNAL_B), INTERNAL_B),
        ((PUBLIC_A, PUBLIC_C, PUBLIC_B), PUBLIC_B),
    ],
)
def test_a_redirect_goes_to_the_listener_the_member_dials(
    bootstrap: tuple[str, str, str], target: str
) -> None:
    """The redirect is followed, not the list walked: the controller listed between the first
    and the active one is never asked (with the redirect to a listener the member does not
    dial, the walk asked it first)."""

    async def scenario() -> None:
        channel = ControllerChannel(list(bootstrap), MemberSigner(b"k" * 32, 1))
        first, between = bootstrap[0], bootstrap[1]
        stubs = {first: Stub(active=False), between: Stub(active=False), target: Stub(True)}
        channel._stubs = stubs  # type: ignore[assignment]
        await channel.write("BrokerHeartbeat", c.BrokerHeartbeatRequest(), 0.5)
        assert [stubs[e].calls for e in (first, between, target)] == [1, 0, 1]
        assert channel._active == target
        await channel.close()

    asyncio.run(scenario())


# --- serving ---------------------------------------------------------------------------------


class Answering(controller_pb2_grpc.ControllerServiceServicer):
    async def DescribeCluster(self, request: Any, context: Any) -> Any:
        return c.DescribeClusterResponse(cluster_id="x")


async def _ready(endpoint: str, marker: int) -> grpc.aio.Channel:
    """A connection of its own (a distinct option: no shared subchannel), READY or not."""
    channel = grpc.aio.insecure_channel(endpoint, options=[("samsa.test.marker", marker)])
    channel.get_state(try_to_connect=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(channel.channel_ready(), 2)
    return channel


def test_both_listeners_serve_the_same_servicers_with_their_own_connection_bound() -> None:
    async def scenario() -> None:
        listeners = Listeners(
            "127.0.0.1:0",
            ["samsa.v1.ControllerService"],
            tracing=False,
            connections_max=2,
            internal_listen="127.0.0.1:0",
        )
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(Answering(), listeners.handlers)
        await listeners.start()
        assert listeners.internal is not None
        assert listeners.internal.connections_max == limits.grpc_connections_max
        public = f"127.0.0.1:{listeners.port}"
        internal = f"127.0.0.1:{listeners.internal_port}"
        held = [await _ready(public, marker) for marker in range(2)]
        try:
            # the public quota is full: a third public connection is refused...
            extra = await _ready(public, 99)
            with pytest.raises(grpc.aio.AioRpcError):
                await controller_pb2_grpc.ControllerServiceStub(extra).DescribeCluster(
                    c.DescribeClusterRequest(), timeout=2
                )
            await extra.close()
            # ...and the internal listener serves the same API all the same
            async with grpc.aio.insecure_channel(internal) as channel:
                answer = await controller_pb2_grpc.ControllerServiceStub(channel).DescribeCluster(
                    c.DescribeClusterRequest(), timeout=2
                )
            assert answer.cluster_id == "x"
        finally:
            for channel in held:
                await channel.close()
            await listeners.stop(0)

    asyncio.run(scenario())


def test_without_internal_listen_there_is_one_server() -> None:
    async def scenario() -> None:
        listeners = Listeners("127.0.0.1:0", [], tracing=False)
        assert listeners.internal is None and listeners.internal_port is None
        assert listeners.servers == [listeners.public]

    asyncio.run(scenario())

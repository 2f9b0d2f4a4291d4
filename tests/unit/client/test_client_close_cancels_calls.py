"""Goal: a client's close() never closes a sync gRPC channel under a call in flight on another
thread (grpc/grpc issues 16290, 19235, 19973: that races grpc's C core; twice in six unit runs an
xdist worker died in test_close_is_not_held_by_a_metadata_refresh_to_a_silent_cluster). It
cancels the call instead, whose thread gives up as it did when the channel closed under it, and
the channel closes once no call is in flight on it; a call after close() is refused, and a stub
made after it does not touch the closed channel (a segmentation fault in grpc's C core).

Method: every raw channel the SDK opens is spied on (channel_spy.py): which blocking calls and
futures are in flight on it, and what was in flight when it was closed. A silent cluster (the
test's own listening sockets, which never answer) keeps a call in flight until close(): directly
on `Channels`, then a Consumer's metadata refresh, an Admin's read and a Producer's send() waiting
for a topic's metadata, each closed from another thread while its call waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc
import pytest
from channel_spy import ChannelSpy, silent_servers, spy_channels

from samsa.client import Consumer, Producer
from samsa.client.admin import Admin
from samsa.client.channels import Channels
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2_grpc, controller_pb2, controller_pb2_grpc

__all__ = ["silent_servers"]  # the fixture, used by name

LONG_S = 60.0  # a call's deadline: only close() ends it within the test


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not seen in {timeout_s} s: {what}"
        time.sleep(0.01)


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    """Run `call` on a thread; what it raised is handed back in the list."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # handed to the test's thread
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def closed_after_its_calls(spy: ChannelSpy) -> None:
    """Every channel opened was closed, none under a call in flight, and close() cancelled."""
    wait_for(lambda: spy.closes >= 1, "the channels closed once the call left")
    assert spy.closed_under == [], "a channel was closed under a call in flight"
    assert spy.used_closed == 0, "a method was registered on a closed channel"
    assert spy.cancelled() >= 1, "close() did not cancel the call in flight"


def describe(channels: Channels, endpoint: str) -> object:
    stub = controller_pb2_grpc.ControllerServiceStub(channels.get(endpoint))
    return stub.DescribeTopics(controller_pb2.DescribeTopicsRequest(), timeout=LONG_S)


def test_close_cancels_a_call_in_flight_and_closes_the_channel_after_it(
    monkeypatch: pytest.MonkeyPatch, silent_servers: str
) -> None:
    spy = spy_channels(monkeypatch)
    channels = Channels()
    thread, raised = in_thread(lambda: describe(channels, silent_servers.split(",")[0]))
    assert spy.calls_started.wait(10), "the call did not start"
    channels.close()
    thread.join(LONG_S / 2)
    assert not thread.is_alive(), "close() did not end the call under way"
    assert len(raised) == 1 and isinstance(raised[0], grpc.RpcError)
    assert raised[0].code() == grpc.StatusCode.CANCELLED  # type: ignore[attr-defined]
    closed_after_its_calls(spy)
    assert spy.closes == 1


def test_a_stub_made_and_called_after_close_on_a_channel_got_before_is_refused(
    monkeypatch: pytest.MonkeyPatch, silent_servers: str
) -> None:
    """A refresh got its channel, then another thread's close() closed it: making the stub
    registers its methods with the channel, a segmentation fault once the channel is closed
    (seen in a stress run), so the closed channel must not be touched at all."""
    spy = spy_channels(monkeypatch)
    channels = Channels()
    channel = channels.get(silent_servers.split(",")[0])
    channels.close()
    assert spy.closes == 1, "no call in flight: closed at once"
    stub = controller_pb2_grpc.ControllerServiceStub(channel)
    with pytest.raises(KafkaError, match="closed") as refused:
        stub.DescribeTopics(controller_pb2.DescribeTopicsRequest(), timeout=LONG_S)
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert spy.used_closed == 0, "a method was registered on the closed channel"
    assert spy.futures == [] and spy.inside == 0, "nothing issued on the closed channel"


def test_a_stream_call_on_a_sync_channel_is_refused(silent_servers: str) -> None:
    """close() could not cancel it: the sync channels make unary calls only."""
    channels = Channels()
    stub = broker_pb2_grpc.BrokerServiceStub(channels.get(silent_servers.split(",")[0]))
    streams = [name for name in dir(stub) if name.endswith("Stream")]
    assert streams, "BrokerService has streams"
    try:
        for name in streams:
            with pytest.raises(TypeError, match="unary calls only"):
                list(getattr(stub, name)(iter(())))  # a traced stream raises once iterated
    finally:
        channels.close()


def test_consumer_close_cancels_its_metadata_refresh(
    monkeypatch: pytest.MonkeyPatch, silent_servers: str
) -> None:
    """The case an xdist worker died in: the driver's refresh (a worker thread) in flight."""
    spy = spy_channels(monkeypatch)
    consumer = Consumer({"bootstrap.servers": silent_servers})
    with consumer._progress:  # assigned, its leader unknown: the driver refreshes
        consumer._state.assign([("t", 0)])
        consumer._state.seek(("t", 0), 5)
    consumer._driver.wake_threadsafe()
    assert spy.calls_started.wait(10), "no refresh started"
    consumer.close(timeout=1.0)
    closed_after_its_calls(spy)


def test_admin_close_cancels_a_read_on_another_thread(
    monkeypatch: pytest.MonkeyPatch, silent_servers: str
) -> None:
    spy = spy_channels(monkeypatch)
    admin = Admin({"bootstrap.servers": silent_servers, "request.timeout.ms": int(LONG_S * 1000)})
    thread, raised = in_thread(admin.list_topics)
    assert spy.calls_started.wait(10), "the read did not start"
    admin.close()
    thread.join(LONG_S / 2)
    assert not thread.is_alive(), "close() did not end the read under way"
    assert len(raised) == 1 and "closed" in str(raised[0])
    closed_after_its_calls(spy)


def test_producer_close_cancels_a_send_waiting_for_metadata(
    monkeypatch: pytest.MonkeyPatch, silent_servers: str
) -> None:
    """send() on the application's thread refreshes for the topic's partition count."""
    spy = spy_channels(monkeypatch)
    producer = Producer({"bootstrap.servers": silent_servers, "max.block.ms": int(LONG_S * 1000)})
    thread, raised = in_thread(lambda: producer.send("t", b"v"))
    assert spy.calls_started.wait(10), "send() did not ask for metadata"
    producer.close(timeout=1.0)
    thread.join(LONG_S / 2)
    assert not thread.is_alive(), "close() did not end the send() waiting for metadata"
    assert len(raised) == 1
    closed_after_its_calls(spy)

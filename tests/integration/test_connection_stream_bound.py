"""Goal: one client connection cannot make a service hold more than
`limits.grpc_streams_per_connection_max` requests at once, and a gRPC client that asks for more is
queued, not failed. FetchMetadata needs no cluster secret, and a stranger's long-polls on one
connection grew a controller's memory without bound.

Method: a real controller (1 controller, no broker) per test; every call a FetchMetadata long-poll
(30 s, at an offset far beyond the metadata log, so it waits its whole max_wait_ms).
- A well-behaved client: on ONE grpc.aio channel, the bound plus a few long-polls, then a
  DescribeCluster. The same short call on a second channel (its own connection) completes, three
  times over, while the first waits: the server advertised the bound, so the client holds it back.
  Then the queued long-polls and one parked one are cancelled (a queued call never reached the
  server; the parked one frees its stream), and only then does the first channel's call complete.
  Events are recorded as they happen and their order is asserted, not their timing.
- A client that ignores the bound, writing HTTP/2 frames by hand: it opens the bound plus a few
  streams at once and then pings; the server resets exactly the streams beyond the bound
  (REFUSED_STREAM) before it answers. This one fails without the bound whatever the timing; the
  first, without it, saw the first channel's call answered before the cancellations in 13 runs
  of 14.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster

from samsa.common import limits
from samsa.v1 import controller_pb2, controller_pb2_grpc

pytestmark = pytest.mark.timeout(120)

# Long-polls beyond the bound: the client queues them rather than failing them.
QUEUED_POLLS = 3
# An offset no metadata log reaches: the long-poll waits its whole max_wait_ms.
OFFSET_AHEAD = 2**62
# Each channel its own connection: by default, grpc channels of one process with the same target
# and options share one (the global subchannel pool), and the bound is per connection.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
CALL_TIMEOUT_S = 30.0


@pytest.fixture
def endpoint(tmp_path: Path):
    """A controller of its own for each test: right after a connection's thousand calls are
    cancelled, grpc.aio answered some new calls on another connection CANCELLED for a moment."""
    with local_cluster(tmp_path, controllers=1, brokers=0) as running:
        yield running.spec.controllers[0].endpoint


async def describe(stub: controller_pb2_grpc.ControllerServiceStub) -> None:
    await stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=CALL_TIMEOUT_S)


async def hold_the_bound_and_probe(endpoint: str) -> tuple[list[str], int]:
    """The events in the order they happened, and how many long-polls had ended before the
    cancellations (none may: a queued one waits, it is not refused)."""
    events: list[str] = []
    crowded = grpc.aio.insecure_channel(endpoint, options=OWN_CONNECTION)
    other = grpc.aio.insecure_channel(endpoint, options=OWN_CONNECTION)
    polls: list[grpc.aio.UnaryUnaryCall] = []
    try:
        crowded_stub = controller_pb2_grpc.ControllerServiceStub(crowded)
        other_stub = controller_pb2_grpc.ControllerServiceStub(other)
        # Connected, and the server's SETTINGS (the bound) are known to the client.
        await describe(crowded_stub)
        await describe(other_stub)
        parked = controller_pb2.FetchMetadataRequest(
            end_offset=OFFSET_AHEAD, max_wait_ms=limits.metadata_long_poll_ms_max
        )
        polls = [
            crowded_stub.FetchMetadata(parked, timeout=CALL_TIMEOUT_S * 2)
            for _ in range(limits.grpc_streams_per_connection_max + QUEUED_POLLS)
        ]

        async def probe() -> None:
            await describe(crowded_stub)
            events.append("crowded channel answered")

        crowded_probe = asyncio.create_task(probe())
        for _ in range(3):
            await describe(other_stub)
            events.append("other channel answered")
        ended_early = sum(poll.done() for poll in polls)
        events.append("streams freed")
        # The queued ones first (the client holds them, so the server sees nothing), then one that
        # the server holds: exactly one stream becomes free, for the probe queued behind them.
        for poll in [*polls[-QUEUED_POLLS:], polls[0]]:
            poll.cancel()
        await crowded_probe
        return events, ended_early
    finally:
        for poll in polls:
            poll.cancel()
        await crowded.close()
        await other.close()


def test_one_connection_holds_at_most_the_bound_and_queues_the_rest(endpoint: str) -> None:
    events, ended_early = asyncio.run(hold_the_bound_and_probe(endpoint))
    assert ended_early == 0, "a long-poll beyond the bound was refused instead of queued"
    assert events == [
        "other channel answered",
        "other channel answered",
        "other channel answered",
        "streams freed",
        "crowded channel answered",
    ]


# --- a client that ignores the bound: HTTP/2 frames written by hand -------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING = 0x0, 0x1, 0x3, 0x4, 0x6
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
SETTINGS_MAX_CONCURRENT_STREAMS = 0x3
REFUSED_STREAM = 0x7


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    header = len(payload).to_bytes(3, "big") + struct.pack(">BBI", kind, flags, stream_id)
    return header + payload


def literal(name_index: int, value: bytes, name: bytes = b"") -> bytes:
    """An HPACK header field without indexing: a static-table name (index < 15) or a new one
    (index 0); names and values shorter than 127 bytes, not Huffman-coded."""
    new_name = bytes([len(name)]) + name if name_index == 0 else b""
    return bytes([name_index]) + new_name + bytes([len(value)]) + value


def fetch_metadata_call(stream_id: int, authority: bytes, request: bytes) -> bytes:
    """HEADERS and DATA (END_STREAM) of one FetchMetadata call on `stream_id`."""
    header_block = (
        b"\x83\x86"  # :method POST, :scheme http (static table 3 and 6)
        + literal(4, b"/samsa.v1.ControllerService/FetchMetadata")  # :path
        + literal(1, authority)  # :authority
        + literal(0, b"application/grpc", b"content-type")
        + literal(0, b"trailers", b"te")
    )
    message = b"\x00" + struct.pack(">I", len(request)) + request  # uncompressed, length-prefixed
    return frame(HEADERS, END_HEADERS, stream_id, header_block) + frame(
        DATA, END_STREAM, stream_id, message
    )


class FrameReader:
    """The frames a server sends on one socket, one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def next(self) -> tuple[int, int, int, bytes]:
        """(type, flags, stream id, payload) of the next frame."""
        while len(self.buffer) < 9 or len(self.buffer) < 9 + self._length():
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buffer += chunk
        length = self._length()
        kind, flags, stream_id = struct.unpack(">BBI", self.buffer[3:9])
        payload, self.buffer = self.buffer[9 : 9 + length], self.buffer[9 + length :]
        return kind, flags, stream_id & 0x7FFF_FFFF, payload

    def _length(self) -> int:
        return int.from_bytes(self.buffer[:3], "big")


def advertised_bound(payload: bytes) -> int | None:
    settings = dict(struct.unpack(">HI", payload[i : i + 6]) for i in range(0, len(payload), 6))
    return settings.get(SETTINGS_MAX_CONCURRENT_STREAMS)


def refused_before_pings(endpoint: str, calls: int) -> tuple[int | None, dict[int, int]]:
    """Open `calls` parked FetchMetadata streams at once on one connection, ignoring the bound the
    server advertises, then ping twice. The server answers each ping after the frames before it,
    and the first ping's answer may overtake the refusals queued with it (gRPC writes ping answers
    first), so the second ping's answer comes after them. Returns the advertised bound and the
    error code of each stream reset before that answer."""
    host, port = endpoint.rsplit(":", 1)
    request = controller_pb2.FetchMetadataRequest(
        end_offset=OFFSET_AHEAD, max_wait_ms=limits.metadata_long_poll_ms_max
    ).SerializeToString()
    with socket.create_connection((host, int(port)), timeout=CALL_TIMEOUT_S) as sock:
        frames = FrameReader(sock)
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        kind, flags, _, payload = frames.next()
        assert (kind, flags) == (SETTINGS, 0), "a server speaks first with its SETTINGS"
        bound = advertised_bound(payload)
        # Our ACK first, so the server enforces what it advertised, then every call at once.
        streams = b"".join(
            fetch_metadata_call(2 * i + 1, endpoint.encode(), request) for i in range(calls)
        )
        sock.sendall(frame(SETTINGS, ACK, 0) + streams + frame(PING, 0, 0, b"first\x00\x00\x00"))
        resets: dict[int, int] = {}
        for ping in (b"first\x00\x00\x00", b"second\x00\x00"):
            while (kind, flags, payload) != (PING, ACK, ping):
                kind, flags, stream_id, payload = frames.next()
                if kind == RST_STREAM:
                    resets[stream_id] = struct.unpack(">I", payload)[0]
            if ping.startswith(b"first"):
                sock.sendall(frame(PING, 0, 0, b"second\x00\x00"))
        return bound, resets


def test_a_client_that_ignores_the_bound_has_the_streams_beyond_it_refused(endpoint: str) -> None:
    bound = limits.grpc_streams_per_connection_max
    advertised, resets = refused_before_pings(endpoint, bound + QUEUED_POLLS)
    assert advertised == bound
    beyond = [2 * i + 1 for i in range(bound, bound + QUEUED_POLLS)]
    assert resets == dict.fromkeys(beyond, REFUSED_STREAM)

"""Goal: the Raft port's policy (raft_guard.py) closes what breaks a bound and never what a peer
legitimately sends.

Method: feed `FrameGuard` byte streams as pysyncobj's socket reads would deliver them (headers
split across reads, many frames per read, pauses), drive `PendingConnections` with explicit
`now_ms`, and size the bounds against frames encoded exactly as pysyncobj's `TcpConnection.send`
encodes them (pickle, zlib level 3, Fernet with the cluster secret).
"""

from __future__ import annotations

import os
import zlib

import pytest
from pysyncobj import pickle as pysyncobj_pickle
from pysyncobj.encryptor import getEncryptor

from samsa.common import limits
from samsa.services.controller.raft_guard import (
    FRAME_HEADER,
    Bound,
    FrameGuard,
    PendingConnections,
    RaftPortBounds,
)

SMALL = RaftPortBounds(
    handshake_frame_bytes_max=100,
    frame_bytes_max=1000,
    buffer_bytes_max=2000,
    unauthenticated_connections_max=3,
    handshake_ms_max=500,
)


def frame(body: bytes) -> bytes:
    return FRAME_HEADER.pack(len(body)) + body


def read_all(guard: FrameGuard, stream: bytes, bufsize: int = 64) -> tuple[list[bytes], object]:
    """Deliver `stream` as pysyncobj's read loop would: one round, until the guard yields or the
    stream runs dry. Returns the reads and the violation (None if none)."""
    reads = []
    position = 0
    while position < len(stream):
        size = guard.recv_size(bufsize)
        if size == 0:
            break
        chunk = stream[position : position + size]
        position += len(chunk)
        reads.append(chunk)
        violation = guard.on_received(chunk)
        if violation is not None:
            return reads, violation
    guard.on_round_end()
    return reads, None


# --- FrameGuard ----------------------------------------------------------------------------------


def test_a_stranger_declaring_2_gib_is_closed_at_the_header_before_any_body_is_read():
    guard = FrameGuard(SMALL)
    reads, violation = read_all(guard, FRAME_HEADER.pack(2**31 - 1) + b"\0" * 10_000)
    assert violation is not None and violation.bound is Bound.HANDSHAKE_FRAME
    assert sum(map(len, reads)) == FRAME_HEADER.size, "not one byte of the body was read"
    assert "2147483647" in violation.detail


def test_a_negative_length_is_refused():
    guard = FrameGuard(SMALL)
    _, violation = read_all(guard, FRAME_HEADER.pack(-5) + b"x" * 10)
    assert violation is not None and "negative" in violation.detail


def test_a_header_split_across_reads_is_judged_whole():
    guard = FrameGuard(SMALL)
    header = FRAME_HEADER.pack(5000)
    assert guard.on_received(header[:1]) is None
    assert guard.on_received(header[1:3]) is None
    violation = guard.on_received(header[3:])
    assert violation is not None and violation.bound is Bound.HANDSHAKE_FRAME


def test_in_the_handshake_reads_stop_at_each_frame_end_so_the_transport_can_authenticate():
    guard = FrameGuard(SMALL)
    first, second = frame(b"k" * 60), frame(b"a" * 900)  # the second is too big for a stranger
    reads, violation = read_all(guard, first + second, bufsize=4096)
    assert violation is None
    assert b"".join(reads) == first, "one round delivers exactly one handshake frame"
    guard.authenticate()  # the transport saw the frame parsed and the peer identified
    reads, violation = read_all(guard, second, bufsize=4096)
    assert violation is None and b"".join(reads) == second


def test_without_authentication_the_second_frame_is_refused():
    guard = FrameGuard(SMALL)
    first, second = frame(b"k" * 60), frame(b"a" * 900)
    read_all(guard, first, bufsize=4096)
    _, violation = read_all(guard, second, bufsize=4096)
    assert violation is not None and violation.bound is Bound.HANDSHAKE_FRAME


def test_an_authenticated_peer_may_send_many_frames_per_read_up_to_the_frame_bound():
    guard = FrameGuard(SMALL)
    guard.authenticate()
    stream = b"".join(frame(bytes([n]) * (n * 7 % 300)) for n in range(40))
    position = 0
    while position < len(stream):  # many rounds; the guard never refuses
        reads, violation = read_all(guard, stream[position:], bufsize=333)
        assert violation is None
        position += sum(map(len, reads))
    assert guard.unparsed_bytes == 0
    _, violation = read_all(guard, FRAME_HEADER.pack(1001))
    assert violation is not None and violation.bound is Bound.FRAME


def test_buffered_bytes_never_exceed_the_bound_and_only_the_partial_frame_is_carried():
    guard = FrameGuard(SMALL)
    guard.authenticate()
    stream = b"".join(frame(b"z" * 996) for _ in range(10))  # 1000-byte frames
    reads, violation = read_all(guard, stream, bufsize=700)
    assert violation is None
    delivered = sum(map(len, reads))
    assert delivered == SMALL.buffer_bytes_max, "the round stops at the buffer bound"
    assert guard.unparsed_bytes == delivered % 1000, "after parsing only the partial frame stays"
    reads, _ = read_all(guard, stream[delivered:], bufsize=700)
    assert sum(map(len, reads)) == SMALL.buffer_bytes_max - delivered % 1000


def test_a_maximal_frame_always_fits_the_buffer():
    guard = FrameGuard(SMALL)
    guard.authenticate()
    stream = frame(b"m" * SMALL.frame_bytes_max) + frame(b"n" * 10)
    reads, violation = read_all(guard, stream, bufsize=64)
    assert violation is None and sum(map(len, reads)) == len(stream)


# --- PendingConnections ------------------------------------------------------------------------


def test_beyond_the_bound_a_new_connection_closes_the_oldest():
    pending: PendingConnections[str] = PendingConnections(SMALL)
    assert pending.admit("a", 0) == [] and pending.admit("b", 1) == []
    assert pending.admit("c", 2) == []
    closing = pending.admit("d", 3)
    assert [key for key, _ in closing] == ["a"]
    assert closing[0][1].bound is Bound.UNAUTHENTICATED_CONNECTIONS
    pending.discard("a")
    pending.authenticated("b")
    assert len(pending) == 2 and pending.admit("e", 4) == []


def test_a_connection_still_in_the_handshake_after_the_deadline_is_closed():
    pending: PendingConnections[str] = PendingConnections(SMALL)
    pending.admit("idle", 0)
    pending.admit("peer", 100)
    pending.admit("late", 400)
    pending.authenticated("peer")
    assert pending.expired(499) == []
    closing = pending.expired(500)
    assert [key for key, _ in closing] == ["idle"]
    assert closing[0][1].bound is Bound.HANDSHAKE_TIME and "500 ms" in closing[0][1].detail


# --- the bounds against pysyncobj's real frames -----------------------------------------------


@pytest.fixture(scope="module")
def encryptor():
    return getEncryptor("s" * limits.cluster_secret_length_min)


def encode(encryptor, message: object, rand_key: bytes | None = None) -> bytes:
    """One frame exactly as pysyncobj's TcpConnection.send builds it."""
    if rand_key is not None:
        message = (rand_key, message)
    data = zlib.compress(pysyncobj_pickle.dumps(message), 3)
    return frame(encryptor.encrypt_at_time(data, 12345))


def test_every_handshake_frame_fits_the_handshake_bound(encryptor):
    key = os.urandom(32)
    frames = [
        encode(encryptor, os.urandom(32)),  # each side's random key
        encode(encryptor, "controller-host.example.internal:19093", key),  # the peer's address
        encode(encryptor, "readonly", key),
        encode(encryptor, ["status"], key),  # pysyncobj's admin tool
    ]
    largest = max(len(f) - FRAME_HEADER.size for f in frames)
    assert largest * 10 < limits.raft_handshake_frame_bytes_max, largest
    guard = FrameGuard(RaftPortBounds())
    for one in frames:
        assert guard.on_received(one) is None


def test_the_largest_legitimate_frame_fits_the_frame_bound(encryptor):
    # append_entries overshoots its batch by one entry: just under a batch of small entries,
    # then a maximal metadata batch (pysyncobj's entry: a type byte + pickled (func id, args)).
    def entry(payload: bytes, index: int) -> tuple[bytes, int, int]:
        return (b"\x00" + pysyncobj_pickle.dumps((0, (payload,))), index, 7)

    small = [
        entry(os.urandom(200), i) for i in range(limits.raft_append_entries_batch_bytes // 250)
    ]
    entries = [*small, entry(os.urandom(limits.metadata_batch_bytes_max), len(small))]
    message = {
        "type": "append_entries",
        "term": 7,
        "commit_index": 10**9,
        "entries": entries,
        "prevLogIdx": 10**9,
        "prevLogTerm": 7,
    }
    encoded = encode(encryptor, message, os.urandom(32))
    assert len(encoded) - FRAME_HEADER.size <= limits.raft_frame_bytes_max
    chunk = {
        "type": "append_entries",
        "serialized": (os.urandom(limits.raft_snapshot_chunk_bytes), False, False),
    }
    assert len(encode(encryptor, chunk, os.urandom(32))) <= limits.raft_frame_bytes_max
    guard = FrameGuard(RaftPortBounds())
    guard.authenticate()
    assert guard.on_received(encoded) is None


def test_the_quorum_refuses_a_batch_its_peers_would_refuse_as_a_frame():
    from samsa.services.controller.quorum import MetadataBatchTooLargeError, MetadataQuorum

    quorum = MetadataQuorum.__new__(MetadataQuorum)  # no Raft: the check comes first
    with pytest.raises(MetadataBatchTooLargeError, match="split the request"):
        quorum.submit(b"\0" * (limits.metadata_batch_bytes_max + 1), lambda *_: None)

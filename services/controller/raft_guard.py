"""What the Raft port accepts from a connection before it has proved the cluster secret.

Theory of operation. pysyncobj frames every message as a 4-byte native `int` length followed by
a Fernet token, and appends whatever a socket delivers to one `bytes` buffer until the declared
length has arrived; only then does it decrypt (and so authenticate). A stranger that declares a
2 GiB frame and keeps sending therefore grows the controller's memory without limit, and since
pysyncobj reads until the socket runs dry and re-copies the buffer on every read, it also holds
the tick thread, which costs the controller its Raft leadership. This module decides, from the
bytes alone and before any decryption, what pysyncobj may read:

- `FrameGuard` follows one connection's frame boundaries ahead of pysyncobj's parser. A pending
  connection (still in the handshake) may declare frames of at most
  `raft_handshake_frame_bytes_max` and is read one frame at a time, so that the transport can
  mark it authenticated before a byte of the next frame is judged. An authenticated connection
  may declare `raft_frame_bytes_max`, and pysyncobj never holds more than
  `raft_connection_buffer_bytes_max` of it unparsed: past that the guard stops reading (TCP
  back-pressure) until pysyncobj has parsed what it holds. A declaration beyond the bound, or a
  negative one, closes the connection at its 4-byte header.
- `PendingConnections` bounds how many incoming connections may be in the handshake at once
  (`raft_unauthenticated_connections_max`; a new one beyond that closes the oldest, so a stranger
  cannot hold every slot) and for how long (`raft_handshake_ms_max`).

Pure: callers pass bytes and `now_ms`; the pysyncobj adapter is raft_transport.py.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from samsa.common import limits

# pysyncobj's frame header: struct.pack('i', len(token)), native byte order and size.
FRAME_HEADER = struct.Struct("i")


class Bound(enum.Enum):
    """A bound a connection can break; the value names its limit in common/limits.py."""

    HANDSHAKE_FRAME = "raft_handshake_frame_bytes_max"
    FRAME = "raft_frame_bytes_max"
    UNAUTHENTICATED_CONNECTIONS = "raft_unauthenticated_connections_max"
    HANDSHAKE_TIME = "raft_handshake_ms_max"


@dataclass(frozen=True)
class Violation:
    """Why a connection is closed: the bound it broke, and the figures, for the WARN line."""

    bound: Bound
    detail: str


@dataclass(frozen=True)
class RaftPortBounds:
    """The bounds the Raft port enforces; the defaults are common/limits.py's."""

    handshake_frame_bytes_max: int = limits.raft_handshake_frame_bytes_max
    frame_bytes_max: int = limits.raft_frame_bytes_max
    buffer_bytes_max: int = limits.raft_connection_buffer_bytes_max
    unauthenticated_connections_max: int = limits.raft_unauthenticated_connections_max
    handshake_ms_max: int = limits.raft_handshake_ms_max

    def __post_init__(self) -> None:
        assert 0 < self.handshake_frame_bytes_max <= self.frame_bytes_max
        assert self.frame_bytes_max + FRAME_HEADER.size <= self.buffer_bytes_max
        assert self.unauthenticated_connections_max >= 1 and self.handshake_ms_max > 0


class FrameGuard:
    """One connection's byte stream as pysyncobj will parse it: where its frames begin and end,
    and how much of it pysyncobj holds unparsed (see the module docstring).

    The driver calls `recv_size` before each socket read (0: report "would block" instead, which
    ends pysyncobj's read loop so that it parses), `on_received` with what the read returned (a
    `Violation`: close the connection), and `on_round_end` whenever pysyncobj's read loop ends
    on "would block" (pysyncobj then parses every complete frame it holds)."""

    __slots__ = (
        "_bounds",
        "_frame_position",
        "_frame_remaining",
        "_header",
        "_unparsed",
        "_yield",
        "authenticated",
    )

    def __init__(self, bounds: RaftPortBounds) -> None:
        self._bounds = bounds
        self.authenticated = False
        self._header = bytearray()  # the current frame's header bytes while incomplete
        self._frame_remaining = 0  # body bytes of the current frame still to come
        self._frame_position = 0  # bytes of the current (incomplete) frame seen, header included
        self._unparsed = 0  # bytes pysyncobj holds that it has not parsed yet
        self._yield = False  # end this read round before reading more

    def authenticate(self) -> None:
        """The peer proved the cluster secret: allow full-size frames from now on."""
        self.authenticated = True

    @property
    def frame_bytes_max(self) -> int:
        if self.authenticated:
            return self._bounds.frame_bytes_max
        return self._bounds.handshake_frame_bytes_max

    @property
    def unparsed_bytes(self) -> int:
        """Bytes pysyncobj holds unparsed for this connection, by this guard's count."""
        return self._unparsed

    def recv_size(self, bufsize: int) -> int:
        """How many bytes the next read may ask for (at most `bufsize`); 0: yield instead."""
        if self._yield:
            return 0
        if self.authenticated:
            return max(0, min(bufsize, self._bounds.buffer_bytes_max - self._unparsed))
        # In the handshake, never read past the end of the current frame: the transport must
        # see it parsed (and maybe authenticate) before the next header is judged.
        if self._frame_remaining == 0:
            return min(bufsize, FRAME_HEADER.size - len(self._header))
        return min(bufsize, self._frame_remaining)

    def on_received(self, data: bytes) -> Violation | None:
        """Account for bytes pysyncobj is about to buffer; a Violation means close now."""
        self._unparsed += len(data)
        view = memoryview(data)
        while view:
            if self._frame_remaining == 0:
                # Filling the next frame's header; the previous frame, if any, is complete.
                take = min(FRAME_HEADER.size - len(self._header), len(view))
                self._header += view[:take]
                view = view[take:]
                self._frame_position += take
                if len(self._header) < FRAME_HEADER.size:
                    break
                (declared,) = FRAME_HEADER.unpack(self._header)
                self._header.clear()
                violation = self._judge(declared)
                if violation is not None:
                    return violation
                self._frame_remaining = declared
            else:
                take = min(self._frame_remaining, len(view))
                view = view[take:]
                self._frame_remaining -= take
                self._frame_position += take
            if self._frame_remaining == 0 and not self._header:
                self._frame_position = 0  # a whole frame is in: pysyncobj can parse it
                if not self.authenticated:
                    self._yield = True
        assert self._unparsed <= self._bounds.buffer_bytes_max or not self.authenticated
        return None

    def on_round_end(self) -> None:
        """pysyncobj stopped reading and parses every complete frame: only the incomplete one
        stays buffered."""
        self._unparsed = self._frame_position
        self._yield = False

    def _judge(self, declared: int) -> Violation | None:
        if declared < 0:
            bound = Bound.FRAME if self.authenticated else Bound.HANDSHAKE_FRAME
            return Violation(bound, f"a frame of negative length {declared} declared")
        if declared > self.frame_bytes_max:
            if self.authenticated:
                bound, stage = Bound.FRAME, "an authenticated peer"
            else:
                bound, stage = Bound.HANDSHAKE_FRAME, "a connection in the handshake"
            return Violation(
                bound,
                f"{stage} declared a frame of {declared} bytes; at most {self.frame_bytes_max}",
            )
        return None


K = TypeVar("K", bound=Hashable)


class PendingConnections(Generic[K]):
    """Incoming connections still in the handshake, oldest first, with when they were accepted.

    `admit` and `expired` return the connections to close, each with its Violation; the driver
    closes them and then calls `discard` (as it does for any connection that goes away)."""

    def __init__(self, bounds: RaftPortBounds) -> None:
        self._bounds = bounds
        self._accepted_ms: dict[K, int] = {}  # insertion-ordered: oldest first

    def __len__(self) -> int:
        return len(self._accepted_ms)

    def __contains__(self, key: object) -> bool:
        return key in self._accepted_ms

    def admit(self, key: K, now_ms: int) -> list[tuple[K, Violation]]:
        """Track a newly accepted connection; beyond the bound, the oldest ones must close."""
        assert key not in self._accepted_ms
        self._accepted_ms[key] = now_ms
        excess = len(self._accepted_ms) - self._bounds.unauthenticated_connections_max
        if excess <= 0:
            return []
        detail = (
            f"{len(self._accepted_ms)} connections in the handshake; at most "
            f"{self._bounds.unauthenticated_connections_max}, the oldest is closed"
        )
        oldest = list(self._accepted_ms)[:excess]
        return [(old, Violation(Bound.UNAUTHENTICATED_CONNECTIONS, detail)) for old in oldest]

    def expired(self, now_ms: int) -> list[tuple[K, Violation]]:
        """Connections that have been in the handshake longer than the bound."""
        deadline_ms = now_ms - self._bounds.handshake_ms_max
        closing = []
        for key, accepted_ms in self._accepted_ms.items():
            if accepted_ms > deadline_ms:
                break  # oldest first: the rest are younger
            detail = (
                f"still in the handshake after {now_ms - accepted_ms} ms; "
                f"at most {self._bounds.handshake_ms_max}"
            )
            closing.append((key, Violation(Bound.HANDSHAKE_TIME, detail)))
        return closing

    def authenticated(self, key: K) -> None:
        """The connection finished its handshake: it no longer counts."""
        self._accepted_ms.pop(key, None)

    def discard(self, key: K) -> None:
        """The connection is gone."""
        self._accepted_ms.pop(key, None)

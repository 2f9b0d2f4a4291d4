"""pysyncobj's TCP transport with the Raft port's bounds (raft_guard.py) applied before decryption.

Theory of operation. `GuardedTcpTransport` is a `TCPTransport` subclass that `MetadataQuorum`
passes to `SyncObj` as its `transportClass`, so nothing is patched globally. pysyncobj's
`TcpConnection` reads its socket with `recv` and buffers what it gets; we give each connection a
socket wrapper whose `recv` asks its `FrameGuard` how much may be read, reports "would block"
when the guard says stop (pysyncobj then parses what it holds), and raises ECONNABORTED when a
frame header breaks a bound (pysyncobj then closes the connection, before buffering the frame).
Incoming connections are wrapped as they are accepted, outgoing ones when they connect. The
listening socket's backlog is raised to `raft_listen_backlog_max` once bound.

A connection counts as authenticated once the transport has identified it: an incoming one when
its peer named itself in a frame that carries our fresh random key (so it holds the secret now,
and is not replaying an old frame); an outgoing one when the peer's first frame decrypted. Until
then it is pending: small frames only, at most `raft_unauthenticated_connections_max` of them,
each for at most `raft_handshake_ms_max`, enforced on pysyncobj's tick thread (`_onTick`).

Every close is a WARN line naming the peer and the bound, at most `raft_guard_log_lines_max`
per `raft_guard_log_window_ms` for each bound, then one summary line with the count of those
not written (from the tick, once the window is over).

The wrapper is installed through a private attribute of pysyncobj's `TcpConnection`
(`_TcpConnection__socket`), the backlog through `TcpServer`'s; the import-time checks below make
a pysyncobj that renamed them fail at start, rather than run unguarded.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from typing import Any

from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import TcpServer
from pysyncobj.transport import TCPTransport

from samsa.common import limits
from samsa.services.controller.raft_guard import (
    Bound,
    FrameGuard,
    PendingConnections,
    RaftPortBounds,
    Violation,
)
from samsa.services.runtime.rate_limited_log import LogRateLimiter

log = logging.getLogger(__name__)

_SOCKET_ATTRIBUTE = "_TcpConnection__socket"
_SERVER_SOCKET_ATTRIBUTE = "_TcpServer__socket"
assert _SOCKET_ATTRIBUTE in TcpConnection.__init__.__code__.co_names, (
    "pysyncobj's TcpConnection no longer keeps its socket where raft_transport.py wraps it"
)
assert _SERVER_SOCKET_ATTRIBUTE in TcpServer.bind.__code__.co_names, (
    "pysyncobj's TcpServer no longer keeps its socket where raft_transport.py finds it"
)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class GuardedSocket:
    """A socket whose `recv` is metered by a FrameGuard; everything else is the socket's own."""

    def __init__(self, sock: socket.socket, guard: FrameGuard, peer: str, transport: Any) -> None:
        self._sock = sock
        self.guard = guard
        self.peer = peer
        self._transport = transport

    def recv(self, bufsize: int) -> bytes:
        size = self.guard.recv_size(bufsize)
        if size == 0:
            self.guard.on_round_end()
            raise BlockingIOError(errno.EAGAIN, "the Raft guard ends this read round")
        try:
            data = self._sock.recv(size)
        except BlockingIOError:
            self.guard.on_round_end()
            raise
        violation = self.guard.on_received(data)
        if violation is not None:
            self._transport._warn(self.peer, violation)
            raise ConnectionAbortedError(errno.ECONNABORTED, violation.detail)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _guard(conn: TcpConnection, bounds: RaftPortBounds, transport: Any) -> GuardedSocket | None:
    """Wrap `conn`'s socket (once); None when it has none (already closed)."""
    sock = getattr(conn, _SOCKET_ATTRIBUTE)
    if sock is None:
        return None
    if isinstance(sock, GuardedSocket):
        return sock
    try:
        host, port = sock.getpeername()[:2]
        peer = f"{host}:{port}"
    except OSError:
        peer = "unknown peer"
    guarded = GuardedSocket(sock, FrameGuard(bounds), peer, transport)
    setattr(conn, _SOCKET_ATTRIBUTE, guarded)
    return guarded


def _guard_of(conn: TcpConnection) -> GuardedSocket | None:
    sock = getattr(conn, _SOCKET_ATTRIBUTE, None)
    return sock if isinstance(sock, GuardedSocket) else None


class GuardedTcpTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport, with every connection's reads bounded (module docstring)."""

    bounds = RaftPortBounds()

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        self._pending: PendingConnections[TcpConnection] = PendingConnections(self.bounds)
        self._log_limiters = {
            bound: LogRateLimiter(limits.raft_guard_log_lines_max, limits.raft_guard_log_window_ms)
            for bound in Bound
        }
        # Peer Raft address -> when a Raft message from it last arrived (ms since the epoch; tick
        # thread): DescribeQuorum's last fetch time of a voter (quorum_status.py).
        self.last_message_ms: dict[str, int] = {}
        super().__init__(syncObj, selfNode, otherNodes)

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        self.last_message_ms[str(node.id)] = _wall_ms()
        super()._onMessageReceived(node, message)

    # --- incoming connections ------------------------------------------------------------------

    def _maybeBind(self) -> None:
        was_ready = self._ready
        super()._maybeBind()
        if self._ready and not was_ready and self._server is not None:
            # Listening again on a bound socket only changes its backlog (pysyncobj's is 5).
            getattr(self._server, _SERVER_SOCKET_ATTRIBUTE).listen(limits.raft_listen_backlog_max)

    def _onNewIncomingConnection(self, conn: TcpConnection) -> None:
        super()._onNewIncomingConnection(conn)
        if _guard(conn, self.bounds, self) is None:
            return
        for old, violation in self._pending.admit(conn, _monotonic_ms()):
            self._close(old, violation)

    def _onIncomingMessageReceived(self, conn: TcpConnection, message: Any) -> None:
        super()._onIncomingMessageReceived(conn, message)
        identified = (
            conn.state == CONNECTION_STATE.CONNECTED and conn not in self._unknownConnections
        )
        if identified and conn in self._pending:
            self._pending.authenticated(conn)
            if (guarded := _guard_of(conn)) is not None:
                guarded.guard.authenticate()

    # --- outgoing connections ------------------------------------------------------------------

    def _onOutgoingConnected(self, conn: TcpConnection) -> None:
        _guard(conn, self.bounds, self)  # a fresh socket on every (re)connect; nothing read yet
        super()._onOutgoingConnected(conn)

    def _onOutgoingMessageReceived(self, conn: TcpConnection, message: Any) -> None:
        super()._onOutgoingMessageReceived(conn, message)
        if (guarded := _guard_of(conn)) is not None:
            guarded.guard.authenticate()

    # --- both ----------------------------------------------------------------------------------

    def _onDisconnected(self, conn: TcpConnection) -> None:
        self._pending.discard(conn)
        super()._onDisconnected(conn)

    def _onTick(self) -> None:
        super()._onTick()
        now_ms = _monotonic_ms()
        for conn, violation in self._pending.expired(now_ms):
            self._close(conn, violation)
        for bound, limiter in self._log_limiters.items():
            if suppressed := limiter.close_window(now_ms):
                self._summarize(bound, suppressed)

    def _close(self, conn: TcpConnection, violation: Violation) -> None:
        guarded = _guard_of(conn)
        self._warn(guarded.peer if guarded is not None else "unknown peer", violation)
        self._pending.discard(conn)
        self._unknownConnections.discard(conn)
        conn.disconnect()

    def _warn(self, peer: str, violation: Violation) -> None:
        admission = self._log_limiters[violation.bound].admit(_monotonic_ms())
        if admission.suppressed_before:
            self._summarize(violation.bound, admission.suppressed_before)
        if admission.write:
            log.warning(
                "closed a Raft connection from %s: %s (%s)",
                peer,
                violation.detail,
                violation.bound.value,
                extra={"peer": peer, "bound": violation.bound.value},
            )

    def _summarize(self, bound: Bound, suppressed: int) -> None:
        log.warning(
            "closed %d more Raft connections for breaking %s in the last %d s (not logged)",
            suppressed,
            bound.value,
            limits.raft_guard_log_window_ms // 1000,
            extra={"suppressed": suppressed, "bound": bound.value},
        )

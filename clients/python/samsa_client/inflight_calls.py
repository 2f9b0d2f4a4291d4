"""Which sync gRPC calls are in flight on a client's channels, and when those may be closed.

Theory of operation. gRPC Python's `Channel.close()` while another thread is blocked in a call on
that channel races grpc's C core: a crash of the whole process at times (grpc/grpc issues 16290,
19235, 19973), a ValueError ("Cannot invoke RPC on closed channel!") out of the call at others.
A client's close() must still end a call under way on another thread (a metadata refresh waiting
up to 5 s on a silent cluster), so the sync channels never make a call close() cannot cancel
(cancellable_channel.py issues each one as a future), and close() cancels instead of closing
under them: `close` hands back the calls to cancel, and the channels close only once the last
call has left (`end` says when), on the thread of that call.

A call is counted from before it is issued (`begin`) to after its thread stopped waiting on it
(`end`), so that a close() between the two still holds the channels open for it: `started` says
the call must be cancelled at once (close() came while it was being issued). Pure: the adapter
holds the lock, cancels and closes.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode

Call = TypeVar("Call")


def closed_error() -> KafkaError:
    """A call once the client's close() began: refused, not retried (channels.py's too)."""
    return KafkaError("the client is closed", ErrorCode.INVALID_REQUEST)


class InFlightCalls(Generic[Call]):
    """The calls in flight (and those being issued), and whether the channels may close."""

    def __init__(self) -> None:
        self.issuing = 0  # begun, not yet `started` (nor failed to start)
        self.calls: set[Call] = set()
        self.closing = False  # close() began: no new call, the channels close once idle
        self.channels_closed = False  # handed out once, by `close` or `end`

    def begin(self) -> None:
        """A call is about to be issued; KafkaError once the client's close() began."""
        if self.closing:
            raise closed_error()
        self.issuing += 1

    def started(self, call: Call) -> bool:
        """The call begun is issued; True: cancel it at once (close() came meanwhile)."""
        self.issuing -= 1
        self.calls.add(call)
        return self.closing

    def end(self, call: Call | None) -> bool:
        """The call's thread stopped waiting on it (`call` None: it failed to start). True: close
        the channels now, on this thread (close() came and this was the last call)."""
        if call is None:
            self.issuing -= 1
        else:
            self.calls.discard(call)
        return self._closable()

    def close(self) -> tuple[list[Call], bool]:
        """The client's close(): the calls to cancel, and whether to close the channels now (no
        call in flight; else the last call's `end` says so)."""
        self.closing = True
        return list(self.calls), self._closable()

    def _closable(self) -> bool:
        if not self.closing or self.channels_closed or self.issuing or self.calls:
            return False
        self.channels_closed = True
        return True

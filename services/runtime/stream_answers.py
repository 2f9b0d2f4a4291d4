"""The answering side of a served request stream (a broker's ProduceStream and
WriteTxnMarkersStream, a coordinator's AddPartitionsToTxnStream and TransactionStream): each
request is handled in the stream's reader, answered at once or by a task that waits (for its
replication, for the coordinator's write), and the handler yields the answers as they come.
`answer_each` is the reader of a stream whose every request runs as a task of its own.

grpc allows one operation at a time per call and only the handler's task may send the status.
So the reader and the wait tasks never write or abort: they queue answers, or record a failure
(a refused request, an undecodable one, a bug) and wake the handler, which aborts with it (or
raises a bug's exception, which the RPC guard answers INTERNAL). The stream ends with that
status; it never hangs. At most `limits.produce_stream_in_flight_max` wait tasks run per stream
(the reader waits for room beyond that), and at most `limits.produce_stream_answers_queued_max`
answers wait for the handler (the reader and the tasks wait beyond that: the client is slow).

Draining. A client keeps its stream open for as long as it runs, so a stopping service would
wait out its whole grace period on every stream. Given the service's `draining` event, a stream
takes no request once it is set: a reader waiting for the client's next request (`requests`) is
cancelled there, one busy with a request finishes it and reads no more; every request read is
answered, then the stream ends with UNAVAILABLE (DRAINED). The client sends again what had no
answer (every request these streams carry is safe to send again, common/request_stream.py), to
whoever serves it now. A request cancelled as it was read was never acted on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Generic, TypeVar

import grpc

from samsa.common import limits

Answer = TypeVar("Answer")
Item = TypeVar("Item")
Refusal = tuple[grpc.StatusCode, str]

DRAINED: Refusal = (
    grpc.StatusCode.UNAVAILABLE,
    "the server is stopping: every request it read is answered; send the others again",
)


class Draining(asyncio.Event):
    """Set as the service stops: its request streams then end (see the module docstring).
    Counts the streams open, so that a service with none has none to wait for."""

    def __init__(self) -> None:
        super().__init__()
        self.streams_open = 0


class StreamFailure(Exception):
    """Why the stream must end, recorded by the reader or a wait task for the handler."""

    def __init__(self, code: grpc.StatusCode | None, details: str, cause: Exception | None):
        super().__init__(details)
        self.code = code  # None: raise `cause` (a bug), as grpc would for the handler's own
        self.details = details
        self.cause = cause


class StreamAnswers(Generic[Answer]):
    """One stream's queued answers, its wait tasks and its first failure."""

    def __init__(self, draining: Draining | None = None) -> None:
        self._answers: asyncio.Queue[Answer | None] = asyncio.Queue(
            maxsize=limits.produce_stream_answers_queued_max
        )
        self._waiting: set[asyncio.Task[None]] = set()
        self._failures: list[StreamFailure] = []
        self._draining = draining  # set once the service stops (see the module docstring)
        self._reading = False  # the reader waits for the client's next request

    async def requests(self, request_iterator: AsyncIterator[Item]) -> AsyncIterator[Item]:
        """The client's requests, until its last or until the service drains."""
        draining = self._draining
        while draining is None or not draining.is_set():
            self._reading = True
            try:
                item = await anext(request_iterator, None)
            finally:
                self._reading = False
            if item is None:
                return
            yield item

    def fail(self, failure: StreamFailure) -> None:
        self._failures.append(failure)
        with contextlib.suppress(asyncio.QueueFull):  # full: the handler is not waiting
            self._answers.put_nowait(None)

    async def put(self, answer: Answer) -> None:
        await self._answers.put(answer)

    async def in_background(self, wait: Coroutine[Any, Any, None]) -> None:
        """Run `wait` (which puts its answer, or fails the stream) as a task, once there is
        room for one more. An exception `wait` lets out (a bug) fails the stream with it: its
        request would otherwise never be answered, and the client would wait for it until its
        own deadline."""
        if len(self._waiting) >= limits.produce_stream_in_flight_max:
            await asyncio.wait(self._waiting, return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.create_task(wait)
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)
        task.add_done_callback(self._fail_on_error)

    def _fail_on_error(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if isinstance(error, Exception):
            self.fail(StreamFailure(None, str(error), error))

    async def answer_each(
        self,
        request_iterator: AsyncIterator[Item],
        refusal: Callable[[Item], Refusal | None],
        answer: Callable[[Item], Coroutine[Any, Any, None]],
    ) -> None:
        """A reader that runs `answer(item)` (which puts the answer) as a task for each request:
        the stream ends with the status `refusal` gives a request, with a bug's exception, or
        once the client's last request is answered."""
        try:
            async for item in self.requests(request_iterator):
                if (refused := refusal(item)) is not None:
                    self.fail(StreamFailure(*refused, None))
                    return
                await self.in_background(answer(item))
        except Exception as error:
            self.fail(StreamFailure(None, str(error), error))
            return
        await self.end()

    async def end(self) -> None:
        """The client sent its last request: end the stream once every wait has answered."""
        if self._waiting:
            await asyncio.wait(self._waiting)
        await self._answers.put(None)

    async def serve(
        self, reader: Coroutine[Any, Any, None], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Answer]:
        """The handler's loop: runs `reader` (which calls `end` or `fail` when it stops) as a
        task and yields the answers until the stream ends; aborts with the first failure."""
        task = asyncio.create_task(reader)
        draining = self._draining
        drain = None
        if draining is not None:
            draining.streams_open += 1
            drain = asyncio.create_task(self._drain(task))
        try:
            while True:
                answer = await self._answers.get()
                if self._failures:
                    failure = self._failures[0]
                    if failure.code is not None:
                        await context.abort(failure.code, failure.details)
                    assert failure.cause is not None
                    raise failure.cause
                if answer is None:
                    break
                yield answer
            if draining is not None and draining.is_set():
                await context.abort(*DRAINED)
        finally:
            task.cancel()
            if draining is not None and drain is not None:
                draining.streams_open -= 1
                drain.cancel()
            for waiting in self._waiting:
                waiting.cancel()

    async def _drain(self, reader: asyncio.Task[None]) -> None:
        """Once the service drains: a reader waiting for a request is cancelled there and the
        stream ends once the requests it read are answered; a busy one ends it itself, after
        its request (`requests`)."""
        assert self._draining is not None
        await self._draining.wait()
        if not self._reading or reader.done():
            return
        reader.cancel()
        await asyncio.wait([reader])
        await self.end()

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


class StreamFailure(Exception):
    """Why the stream must end, recorded by the reader or a wait task for the handler."""

    def __init__(self, code: grpc.StatusCode | None, details: str, cause: Exception | None):
        super().__init__(details)
        self.code = code  # None: raise `cause` (a bug), as grpc would for the handler's own
        self.details = details
        self.cause = cause


class StreamAnswers(Generic[Answer]):
    """One stream's queued answers, its wait tasks and its first failure."""

    def __init__(self) -> None:
        self._answers: asyncio.Queue[Answer | None] = asyncio.Queue(
            maxsize=limits.produce_stream_answers_queued_max
        )
        self._waiting: set[asyncio.Task[None]] = set()
        self._failures: list[StreamFailure] = []

    def fail(self, failure: StreamFailure) -> None:
        self._failures.append(failure)
        with contextlib.suppress(asyncio.QueueFull):  # full: the handler is not waiting
            self._answers.put_nowait(None)

    async def put(self, answer: Answer) -> None:
        await self._answers.put(answer)

    async def in_background(self, wait: Coroutine[Any, Any, None]) -> None:
        """Run `wait` (which puts its answer, or fails the stream) as a task, once there is
        room for one more."""
        if len(self._waiting) >= limits.produce_stream_in_flight_max:
            await asyncio.wait(self._waiting, return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.create_task(wait)
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

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
            async for item in request_iterator:
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
        finally:
            task.cancel()
            for waiting in self._waiting:
                waiting.cancel()

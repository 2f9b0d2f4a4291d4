"""The event loop's side of AnswerBudget (answer_budget.py): fetches waiting in line for room.

A fetch that could read nothing within its room waits here, never blocking the loop: a bare
future per ticket, resolved when the ticket is first in line and its need fits (after a release,
or after the ticket before it left), or by a timer at the fetch's own deadline (its max_wait),
after which it answers what it has, possibly nothing, and the client fetches again.
"""

from __future__ import annotations

import asyncio

import grpc

from samsa.services.broker.requests.answer_budget import ANSWER_COPIES, AnswerBudget
from samsa.services.broker.requests.answer_write_deadline import AnswerWriteDeadline


class AnswerGate:
    def __init__(
        self, memory_bytes_max: int, write_deadline: AnswerWriteDeadline | None = None
    ) -> None:
        """`memory_bytes_max`: what answers may cost at once (fetch.answers.bytes.max); the
        budget counts answer bytes, each costing ANSWER_COPIES of them. `write_deadline`: how
        long an answer may hold them unwritten (answer_write_deadline.py); None: no bound."""
        self.budget = AnswerBudget(memory_bytes_max // ANSWER_COPIES)
        self.write_deadline = write_deadline
        self._wakes: dict[int, asyncio.Future[None]] = {}

    @property
    def held_bytes(self) -> int:
        return self.budget.held_bytes

    def room_bytes(self, ticket: int | None) -> int:
        return self.budget.room_bytes(ticket)

    def hold(self, size_bytes: int, ticket: int | None) -> int:
        return self.budget.hold(size_bytes, ticket)

    def release(self, size_bytes: int) -> None:
        if size_bytes:
            self.budget.release(size_bytes)
            self._wake()

    def release_when_written(self, held_bytes: int, context: grpc.aio.ServicerContext) -> None:
        """For a unary Fetch's answer, about to be returned to gRPC: its bytes are released once
        the call's task ends (written, dropped, or ended by the write deadline). An answer
        holding none needs neither the release nor the deadline."""
        if not held_bytes:
            return
        deadline = self.write_deadline
        timer = deadline.arm("Fetch", held_bytes, context) if deadline is not None else None

        def written(_: object) -> None:
            if timer is not None:
                timer.cancel()
            self.release(held_bytes)

        task = asyncio.current_task()
        assert task is not None, "called from a handler"
        task.add_done_callback(written)

    async def wait(self, need_bytes: int, ticket: int | None, timeout_s: float) -> int:
        """Wait in line until `need_bytes` are free for this fetch, at most `timeout_s`;
        returns its ticket, still in line (`leave` it when done, also on error). Cancelled,
        it leaves the line itself: the caller never learnt a new ticket."""
        ticket = self.budget.wait(need_bytes, ticket)
        loop = asyncio.get_running_loop()
        woken = self._wakes[ticket] = loop.create_future()
        timer = loop.call_later(timeout_s, _resolve, woken)
        try:
            self._wake()  # ready at once: the bytes were freed while it read
            await woken
        except BaseException:
            self.leave(ticket)
            raise
        finally:
            timer.cancel()
            if self._wakes.get(ticket) is woken:
                del self._wakes[ticket]
        return ticket

    def leave(self, ticket: int | None) -> None:
        if ticket is not None:
            self.budget.leave(ticket)
            self._wakes.pop(ticket, None)
            self._wake()

    def _wake(self) -> None:
        ticket = self.budget.ready()
        if ticket is not None and ticket in self._wakes:
            _resolve(self._wakes[ticket])


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

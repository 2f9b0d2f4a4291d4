"""Goal: AnswerWriteDeadline (services/broker/requests/answer_write_deadline.py) ends both tasks
that hold a gRPC call, and arms nothing when it cannot: the budget must never be released while
gRPC still holds an answer.

Method: no gRPC here (tests/integration/test_answer_write_deadline_grpc.py has the real server).
A task plays gRPC's: it creates a task running a coroutine named as grpc.aio's handler coroutine,
which arms the deadline and then waits forever, as a handler whose answer is never read; the
outer task then awaits the call's close, which never comes, as gRPC's does. The timer is 1 ms:
the test waits for the tasks to end, it never measures time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from samsa.services.broker.requests.answer_write_deadline import AnswerWriteDeadline


class Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


async def _handle_exceptions(deadline: AnswerWriteDeadline, armed: list[Any]) -> None:
    armed.append(deadline.arm("Fetch", 100, Context()))  # type: ignore[arg-type]
    await asyncio.get_running_loop().create_future()  # the write that never completes


async def grpc_like_call(deadline: AnswerWriteDeadline, armed: list[Any]) -> None:
    loop = asyncio.get_running_loop()
    handler = loop.create_task(_handle_exceptions(deadline, armed))
    armed.append(handler)
    await loop.create_future()  # the call's close, which never comes for an unread answer
    await handler


def test_the_deadline_cancels_the_handler_and_the_task_that_started_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        deadline = AnswerWriteDeadline(timeout_ms=1)
        deadline.install(asyncio.get_running_loop())
        armed: list[Any] = []
        outer = asyncio.get_running_loop().create_task(grpc_like_call(deadline, armed))
        # A bound against a hang only: the 1 ms timer ends both tasks.
        done, _ = await asyncio.wait([outer], timeout=30)
        assert outer in done and outer.cancelled(), "the task awaiting the close was cancelled"
        handler, timer = armed
        assert timer is not None and handler.cancelled(), "the handler was cancelled"
        assert deadline.ended_count == 1

    with caplog.at_level(logging.WARNING):
        asyncio.run(scenario())
    assert "ended a Fetch from ipv4:127.0.0.1:1" in caplog.text


def test_without_the_task_factory_nothing_is_armed_and_the_log_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        deadline = AnswerWriteDeadline(timeout_ms=1)
        armed: list[Any] = []
        outer = asyncio.get_running_loop().create_task(grpc_like_call(deadline, armed))
        while len(armed) < 2:
            await asyncio.sleep(0)
        assert armed[1] is None
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        assert deadline.ended_count == 0

    with caplog.at_level(logging.WARNING):
        asyncio.run(scenario())
    assert "no write deadline for a Fetch answer" in caplog.text


def test_a_task_factory_already_installed_still_makes_the_tasks() -> None:
    made: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(coro.__name__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(factory)
        deadline = AnswerWriteDeadline(timeout_ms=1)
        deadline.install(loop)
        armed: list[Any] = []
        outer = loop.create_task(grpc_like_call(deadline, armed))
        await asyncio.wait([outer], timeout=30)
        assert outer.cancelled() and armed[1] is not None

    asyncio.run(scenario())
    assert made[:2] == ["grpc_like_call", "_handle_exceptions"]

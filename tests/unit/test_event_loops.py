"""Goal: every Samsa process and SDK loop thread runs on the loop `common/event_loops.py` chooses:
uvloop when installed, the standard loop when SAMSA_EVENT_LOOP=asyncio, and a clear error for
anything else.

Method: call `chosen`, `new_event_loop` and `run` under hand-made environments, with uvloop
present (it is a dependency here) and made absent by replacing the module's import hook."""

from __future__ import annotations

import asyncio
import threading

import pytest

from samsa.common import event_loops

uvloop = pytest.importorskip("uvloop")


def test_uvloop_is_chosen_when_installed_and_nothing_is_asked():
    assert event_loops.chosen({}) == "uvloop"
    assert event_loops.chosen({"SAMSA_EVENT_LOOP": ""}) == "uvloop"


def test_the_standard_loop_is_chosen_on_request(monkeypatch: pytest.MonkeyPatch):
    assert event_loops.chosen({"SAMSA_EVENT_LOOP": "asyncio"}) == "asyncio"
    monkeypatch.setenv("SAMSA_EVENT_LOOP", "asyncio")
    loop = event_loops.new_event_loop()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)
        assert not isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_new_loops_and_run_use_uvloop_by_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SAMSA_EVENT_LOOP", raising=False)
    loop = event_loops.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()

    async def kind() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert event_loops.run(kind()).startswith("uvloop")


def test_an_unknown_choice_is_refused_with_the_choices():
    with pytest.raises(event_loops.EventLoopChoiceError, match="use one of uvloop, asyncio"):
        event_loops.chosen({"SAMSA_EVENT_LOOP": "trio"})


def test_without_uvloop_the_standard_loop_runs_and_asking_for_uvloop_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(event_loops, "_uvloop_factory", lambda: None)
    assert event_loops.chosen({}) == "asyncio"
    with pytest.raises(event_loops.EventLoopChoiceError, match="pip install uvloop"):
        event_loops.chosen({"SAMSA_EVENT_LOOP": "uvloop"})
    monkeypatch.delenv("SAMSA_EVENT_LOOP", raising=False)

    async def kind() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert not event_loops.run(kind()).startswith("uvloop")


@pytest.mark.parametrize("kind", ["uvloop", "asyncio"])
def test_a_thread_loops_to_thread_calls_run_on_daemon_threads(
    monkeypatch: pytest.MonkeyPatch, kind: str
):
    """The sync clients' loops: the interpreter does not wait for their calls at exit
    (test_client_exit_without_close.py), and shutting the executor down waits for them."""
    monkeypatch.setenv("SAMSA_EVENT_LOOP", kind)
    loop = event_loops.new_thread_loop("test")
    release = threading.Event()

    async def calls() -> list[bool]:
        first = asyncio.create_task(asyncio.to_thread(release.wait, 10))
        daemon = await asyncio.to_thread(lambda: threading.current_thread().daemon)
        release.set()
        return [daemon, await first]

    try:
        assert loop.run_until_complete(calls()) == [True, True]
        loop.run_until_complete(loop.shutdown_default_executor())
        with pytest.raises(RuntimeError, match="shutdown"):
            loop.run_until_complete(asyncio.to_thread(int))
    finally:
        loop.close()

"""Goal: a service's first SIGTERM or SIGINT asks for a clean stop and a second one exits at
once; a stop the service began itself (a broker whose metadata log failed sets the event) does
not turn a supervisor's first SIGTERM into that second one, which would skip the logs'
checkpoint and the clean-shutdown mark. The exit code of a second signal is 128 + its number.

Method: SignalCounter with a recording stand-in for os._exit; stop_event() on a real loop, with
real signals sent to this process (the handler only sets the event on the first one)."""

from __future__ import annotations

import asyncio
import os
import signal

from samsa.services.runtime.shutdown import SignalCounter, stop_event


def test_the_first_signal_stops_and_a_second_exits_with_128_plus_its_number() -> None:
    exits: list[int] = []
    counter = SignalCounter(asyncio.Event(), exits.append)
    counter.on_signal(signal.SIGTERM)
    assert counter.stop.is_set() and exits == []
    counter.on_signal(signal.SIGINT)
    assert exits == [128 + signal.SIGINT]


def test_a_stop_the_service_began_itself_does_not_make_the_first_signal_a_second() -> None:
    exits: list[int] = []
    counter = SignalCounter(asyncio.Event(), exits.append)
    counter.stop.set()  # the service stops on its own (following the metadata log failed)
    counter.on_signal(signal.SIGTERM)  # the supervisor's first SIGTERM meanwhile
    assert exits == [], "a first signal cut the clean stop short"
    counter.on_signal(signal.SIGTERM)
    assert exits == [128 + signal.SIGTERM]


def test_stop_event_is_set_by_a_real_sigterm() -> None:
    async def main() -> bool:
        stop = stop_event()
        loop = asyncio.get_running_loop()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(stop.wait(), 5)
            return stop.is_set()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)

    assert asyncio.run(main())

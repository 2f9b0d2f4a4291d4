"""Goal: every call of a closed Consumer is refused at once with a KafkaError saying the consumer
is closed, as Kafka's consumer refuses them (IllegalStateException). Before, pause() and
subscribe() raised RuntimeError('Event loop is closed') from the stopped loop thread, subscribe()
put the member in JOINING first, so unsubscribe() then waited LEAVE_TIMEOUT_S for a leave that
could not be sent, commit() and committed() left a coroutine never awaited, and seek() or
position() answered "not assigned".

Method: a real Consumer with a group.id (its loop thread and drivers start with no network: no
call is made before a subscribe or an assign), closed, then every public call.
"""

from __future__ import annotations

import time
import warnings

import pytest

from samsa.client import Consumer
from samsa.client.errors import KafkaError

TP = ("t", 0)


@pytest.fixture(scope="module")
def closed() -> Consumer:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    consumer.close()
    return consumer


CALLS = {
    "subscribe": lambda c: c.subscribe(["t"]),
    "unsubscribe": lambda c: c.unsubscribe(),
    "assign": lambda c: c.assign([TP]),
    "seek": lambda c: c.seek(TP, 1),
    "seek_to_beginning": lambda c: c.seek_to_beginning(),
    "seek_to_end": lambda c: c.seek_to_end(),
    "pause": lambda c: c.pause([TP]),
    "resume": lambda c: c.resume([TP]),
    "position": lambda c: c.position(TP),
    "poll": lambda c: c.poll(0),
    "commit": lambda c: c.commit(),
    "commit_async": lambda c: c.commit_async(),
    "committed": lambda c: c.committed([TP]),
    "beginning_offsets": lambda c: c.beginning_offsets([TP]),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_closed_consumer_refuses_the_call(closed: Consumer, call: str) -> None:
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited fails the test
        with pytest.raises(KafkaError, match="closed"):
            CALLS[call](closed)
    assert time.monotonic() - started < 1.0, "refused at once"


def test_close_twice_is_a_no_op(closed: Consumer) -> None:
    closed.close()

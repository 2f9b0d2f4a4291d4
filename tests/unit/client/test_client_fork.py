"""Goal: a Producer or Consumer made before os.fork() and used in the child raises an error that
says so (fork_safety.py), and its close() returns at once; so do a record's future from before
the fork, the Admin and the asyncio clients. Before, the child's producer queued
records that nothing sent (a flush() or a close() without a timeout waited for ever, one with a
timeout raised TimeoutError after it and then waited 5 s more for a loop that was not running),
and the child's consumer returned no records from poll(), without an error.

Method: a child interpreter (so that this process forks nothing) with clients whose cluster is
never reached; it forks, and its child reports what each call did.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import os
from samsa.client import Consumer, KafkaError, Producer
producer = Producer({"bootstrap.servers": "127.0.0.1:1"})
consumer = Consumer({"bootstrap.servers": "127.0.0.1:1"})
if os.fork() == 0:
    calls = {
        "send": lambda: producer.send("events", b"x", partition=0),
        "send_many": lambda: producer.send_many("events", [b"x"]),
        "flush": lambda: producer.flush(),
        "poll": lambda: consumer.poll(1),
        "seek": lambda: consumer.seek(("events", 0), 1),
        "close": lambda: (producer.close(), consumer.close()),
    }
    for name, call in calls.items():
        try:
            call()
            print(name, "returned", flush=True)
        except KafkaError as error:
            print(name, "raised", "os.fork()" in str(error), flush=True)
    os._exit(0)
os.wait()
producer.close(5)
consumer.close(5)
"""


def test_clients_made_before_a_fork_refuse_calls_in_the_child() -> None:
    child = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == [
        "send raised True",
        "send_many raised True",
        "flush raised True",
        "poll raised True",
        "seek raised True",
        "close returned",
    ], child.stderr[-3000:]


# The parent keeps its asyncio clients on a loop of its own (run_until_complete per call) and
# forks between two calls; the child goes on with that loop, so the clients' loop checks pass.
SCRIPT_MORE = r"""
import asyncio, os
from samsa.client import Admin, AsyncConsumer, AsyncProducer, KafkaError, Producer
producer = Producer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 60000})
producer._metadata.partition_counts["events"] = 1  # known: the record is queued, lingering
future = producer.send("events", b"x", partition=0)
many = producer.send_many("events", [b"y"])
admin = Admin({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 20000})
loop = asyncio.new_event_loop()
async_producer = AsyncProducer({"bootstrap.servers": "127.0.0.1:1"})
async_consumer = AsyncConsumer({"bootstrap.servers": "127.0.0.1:1"})
loop.run_until_complete(async_producer.start())
loop.run_until_complete(async_consumer.start())
if os.fork() == 0:
    run = lambda coroutine: loop.run_until_complete(asyncio.wait_for(coroutine, 10))
    calls = {
        "future": lambda: future.result(10),
        "send_many future": lambda: many.result(10),
        "admin": lambda: admin.list_topics(),
        "async send": lambda: run(async_producer.send_and_wait("events", b"x", partition=0)),
        "async poll": lambda: run(async_consumer.poll(0.5)),
        "async close": lambda: (run(async_producer.stop()), run(async_consumer.stop())),
        "admin close": lambda: admin.close(),
    }
    for name, call in calls.items():
        try:
            call()
            print(name, "returned", flush=True)
        except KafkaError as error:
            print(name, "raised", "os.fork()" in str(error), flush=True)
        except TimeoutError:
            print(name, "timed out", flush=True)
    os._exit(0)
os.wait()
loop.run_until_complete(async_producer.stop(1))
loop.run_until_complete(async_consumer.stop(1))
producer.close(0)  # the lingering records, never answered, fail
admin.close()
"""


def test_futures_the_admin_and_the_asyncio_clients_from_before_a_fork_refuse_it_too() -> None:
    """A record's future from before the fork waited for ever in the child (nothing there
    settles it); the Admin's calls went out on the parent's gRPC channels (retrying until
    request.timeout.ms when refused); in the asyncio clients a send hung and a poll returned
    nothing, without an error. Each raises the fork error at once now; close() returns."""
    child = subprocess.run(
        [sys.executable, "-c", SCRIPT_MORE], capture_output=True, text=True, timeout=60
    )
    assert child.stdout.splitlines() == [
        "future raised True",
        "send_many future raised True",
        "admin raised True",
        "async send raised True",
        "async poll raised True",
        "async close returned",
        "admin close returned",
    ], child.stderr[-3000:]
    assert child.returncode == 0, child.stderr[-3000:]


# A child that goes on running the parent's loop: asyncio finds no running loop in a forked child,
# but the policy's loop (the copy) still runs once the coroutine that forked awaits a future of it.
# The producer's brokers are the in-memory ones (fake_produce_cluster.py).
RUNNING_LOOP_SCRIPT = r"""
import asyncio
import os
import sys

import pytest

sys.path.insert(0, {tests!r})
from fake_produce_cluster import FakeCluster
from samsa.client import AsyncConsumer, AsyncProducer
from samsa.client.producer_driver import ProducerDriver

FakeCluster("events", partitions=1, brokers=1).install(pytest.MonkeyPatch())
parent, turns = os.getpid(), []
turn = ProducerDriver._turn

async def counted(self):
    turns.append(os.getpid() != parent)
    return await turn(self)

ProducerDriver._turn = counted

async def main():
    producer = AsyncProducer({{"bootstrap.servers": "fake:9092", "linger.ms": 300}})
    consumer = AsyncConsumer({{"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}})
    await producer.start()
    await consumer.start()
    await producer.send("events", b"x", partition=0)  # lingering at the fork; wakes the driver
    if os.fork() == 0:
        loop = asyncio.get_event_loop()
        ran = loop.create_future()
        loop.call_later(1.0, ran.set_result, None)
        await ran  # the loop ran for 1 s in the child, past the batch's linger.ms
        drivers = (consumer._driver, consumer._driver.group)
        stopped = [d._stopping and d._task.done() for d in drivers]
        print(sum(turns), stopped, flush=True)
        os._exit(0)
    os.wait()
    await producer.stop(0)
    await consumer.stop(0)

asyncio.run(main())
"""


def test_a_child_running_the_parents_loop_gives_the_asyncio_drivers_no_turn() -> None:
    """Before, the drivers' tasks took their turns in such a child: the producer's drained the
    parent's lingering batch and sent it again, from the child, over the parent's connections;
    the consumer's and its group's would fetch and heartbeat as the parent's member."""
    script = RUNNING_LOOP_SCRIPT.format(tests=str(Path(__file__).parent))
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.splitlines() == ["0 [True, True]"], child.stderr[-3000:]

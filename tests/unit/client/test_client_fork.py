"""Goal: a Producer or Consumer made before os.fork() and used in the child raises an error that
says so (fork_safety.py), and its close() returns at once. Before, the child's producer queued
records that nothing sent (a flush() or a close() without a timeout waited for ever, one with a
timeout raised TimeoutError after it and then waited 5 s more for a loop that was not running),
and the child's consumer returned no records from poll(), without an error.

Method: a child interpreter (so that this process forks nothing) with clients whose cluster is
never reached; it forks, and its child reports what each call did.
"""

from __future__ import annotations

import subprocess
import sys

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

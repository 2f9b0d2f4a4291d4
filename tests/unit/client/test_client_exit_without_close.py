"""Goal: a script that ends without closing its Producer and Consumer exits at once and quietly,
as a Kafka application does (the clients' network threads are daemons; what was not delivered
is lost, see README). The refreshes of their metadata ran on their loops' default executor,
whose threads the interpreter joins at exit: with the cluster unreachable, the exit waited for a
refresh's retries (5 s), and the consumer's loop, refused its next refresh by the executor
shut down for the exit, logged a traceback every 0.1 s meanwhile (45 of them).

Method: a child interpreter against a port nothing listens on; the time from its last line to
its exit, and its stderr.
"""

from __future__ import annotations

import subprocess
import sys
import time

SCRIPT = """
from samsa.client import Consumer, Producer
producer = Producer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 500})
try:
    producer.send("events", b"x")  # no metadata: its driver goes on refreshing
except Exception as error:
    print("send:", type(error).__name__, flush=True)
consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
consumer.subscribe(["events"])
consumer.poll(0.5)
print("end", flush=True)
"""


def test_a_script_that_does_not_close_its_clients_exits_at_once_and_quietly() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().startswith("send:")
    assert child.stdout.readline() == "end\n"
    ended = time.monotonic()
    _, stderr = child.communicate(timeout=60)
    took = time.monotonic() - ended
    assert child.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    assert took < 2.5, f"{took:.1f} s from the script's end to the interpreter's"

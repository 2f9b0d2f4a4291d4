"""Goal: pause() wakes the consumer driver, in the sync Consumer and the AsyncConsumer alike. A
paused partition's records waiting for poll() held back its broker's next fetch; poll() takes
nothing of a paused partition and so wakes nothing, and the broker's other partitions waited for
the driver's idle turn (0.5 s) before they were fetched again
(test_client_consumer_driver.py shows the fetch a wake sends then).

Method: each facade over a fake driver that counts wakes; no loop thread, no network.
"""

from __future__ import annotations

import threading

from samsa.client import AsyncConsumer, Consumer
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState

T0 = ("t", 0)
CONFIG = {"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "earliest"}


class FakeDriver:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state = FetchState(ConsumerConfig.from_dict(CONFIG))
        self.state.assign([T0])
        self.group = None
        self.wakes = 0

    def wake(self) -> None:
        self.wakes += 1

    def wake_threadsafe(self) -> None:
        self.wakes += 1


def test_the_sync_consumers_pause_wakes_the_driver() -> None:
    driver = FakeDriver()
    consumer = Consumer.__new__(Consumer)  # the facade alone: no loop thread
    consumer._driver = driver  # type: ignore[assignment]
    consumer._state = driver.state
    consumer._progress = threading.Condition(driver.lock)
    consumer._closed = False
    consumer._owner = threading.RLock()  # thread_owner.py
    consumer.pause([T0])
    assert consumer.paused() == [T0]
    assert driver.wakes == 1


def test_the_async_consumers_pause_wakes_the_driver() -> None:
    driver = FakeDriver()
    consumer = AsyncConsumer(CONFIG)
    consumer._driver = driver  # type: ignore[assignment]
    consumer.pause([T0])
    assert consumer.paused() == [T0]
    assert driver.wakes == 1

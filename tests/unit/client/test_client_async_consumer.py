"""Goal: AsyncConsumer has every public call the sync Consumer has, with the same meaning: close()
leaves the group and stops as the sync close() does (stop() is aiokafka's name for it), and
commit_async() commits the positions consumed when it is called, without waiting.

Method: the facade over a fake driver (the real FetchState, a group whose commits are recorded
and whose member state the test sets); no cluster, no network. tests/integration/
test_client_consumer_async.py runs the real thing.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

from samsa.client import AsyncConsumer, Consumer
from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.group_member import MemberState

T0 = ("t", 0)
CONFIG = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "auto.offset.reset": "earliest"}


class FakeMember:
    def __init__(self) -> None:
        self.state = MemberState.STABLE


class FakeGroup:
    def __init__(self) -> None:
        self.member = FakeMember()
        self.commits: list[dict] = []
        self.tasks: list[asyncio.Task[Any]] = []

    async def commit(self, offsets: dict) -> None:
        await asyncio.sleep(0)
        self.commits.append(dict(offsets))

    def spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.append(task)
        return task

    async def commit_at_close(self) -> None:
        """A subscribed member commits as it leaves, not here (GroupDriver.commit_at_close)."""


class FakeDriver:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state = FetchState(ConsumerConfig.from_dict(CONFIG))
        self.group = FakeGroup()
        self.stopped = False

    async def stop(self) -> None:
        self.stopped = True


def consumer_over(driver: FakeDriver) -> AsyncConsumer:
    consumer = AsyncConsumer(CONFIG)
    consumer._driver = driver  # type: ignore[assignment]
    return consumer


def public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


def test_every_public_call_of_the_consumer_is_on_the_async_consumer() -> None:
    assert public(Consumer) - public(AsyncConsumer) == set()


def test_close_leaves_the_group_then_stops_the_driver() -> None:
    driver = FakeDriver()
    consumer = consumer_over(driver)
    left: list[bool] = []

    async def unsubscribe() -> None:
        left.append(not driver.stopped)
        driver.group.member.state = MemberState.UNSUBSCRIBED

    consumer.unsubscribe = unsubscribe  # type: ignore[method-assign]
    asyncio.run(consumer.close())
    assert left == [True], "left the group before the driver stopped"
    assert driver.stopped
    asyncio.run(consumer.close())  # a second close is a no-op
    assert left == [True]


def test_commit_async_commits_the_positions_consumed_when_called() -> None:
    driver = FakeDriver()
    driver.state.assign([T0])
    driver.state.seek(T0, 7)
    consumer = consumer_over(driver)

    async def main() -> None:
        task = consumer.commit_async()
        driver.state.seek(T0, 9)  # after the call: not what is committed
        await task
        await consumer.commit_async({T0: 3})

    asyncio.run(main())
    assert driver.group.commits == [{T0: OffsetAndMetadata(7, -1)}, {T0: OffsetAndMetadata(3)}]

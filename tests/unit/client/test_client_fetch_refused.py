"""Goal: a fetch a broker refuses for a partition because leadership moved (NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH, ...) or because it cannot serve it for now (KAFKA_STORAGE_ERROR,
REPLICA_NOT_AVAILABLE, OFFSET_NOT_AVAILABLE: Kafka's consumer retries all of these after a
metadata update) is retried, never raised by poll(), and never in a hot loop: while the metadata
still names the broker that refused, the partition waits retry.backoff.ms; once the metadata names
another leader — from a refresh, or at once from the answer's own hint (KIP-951 current_leader,
which the consumer driver writes into its metadata) — it is fetched from there at once.

Before, the partition was fetched again from the same broker as soon as its answer came back
(about 2,000 fetches a second while a leader election was under way, each followed by a metadata
refresh), the hint was ignored, and KAFKA_STORAGE_ERROR (a broker's failed disk, whose
partitions the controller moves) was raised by poll() to the application.

Method: drive the pure FetchState with hand-made answers and numbers for time (as
test_client_fetch_state.py does), then the ConsumerDriver against an in-memory broker (as
test_client_consumer_driver.py does) for the hint.
"""

from __future__ import annotations

import asyncio

import pytest

from samsa.client.config import ConsumerConfig
from samsa.client.consumer_driver import ConsumerDriver
from samsa.client.fetch_state import FetchState
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2

T0 = ("t", 0)
T1 = ("t", 1)
NOW = 1_000
BACKOFF_MS = 100  # retry.backoff.ms's default


def make() -> FetchState:
    state = FetchState(
        ConsumerConfig.from_dict(
            {"bootstrap.servers": "localhost:9092", "auto.offset.reset": "earliest"}
        )
    )
    state.assign([T0, T1])
    state.seek(T0, 3)
    state.seek(T1, 7)
    return state


def send(state: FetchState, leaders: dict, now: int) -> dict[int, dict]:
    plan = state.fetches_to_send(leaders, now)
    return {
        node: {(t.name, p.partition): p.fetch_offset for t in r.topics for p in t.partitions}
        for node, r in plan.requests
    }


def refusal(code: ErrorCode, leader: tuple[int, int] | None = None) -> broker_pb2.FetchResponse:
    result = broker_pb2.FetchResponse.PartitionResponse(partition=0, error_code=code)
    if leader is not None:
        result.current_leader.leader_id, result.current_leader.leader_epoch = leader
    return broker_pb2.FetchResponse(
        topics=[broker_pb2.FetchResponse.TopicResponse(name="t", partitions=[result])]
    )


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    ],
)
def test_a_refused_partition_waits_the_backoff_while_the_same_broker_leads(
    code: ErrorCode,
) -> None:
    state = make()
    leaders = {T0: 1, T1: 1}
    assert send(state, leaders, NOW) == {1: {T0: 3, T1: 7}}
    effects = state.on_fetch_answer(1, refusal(code))
    assert effects.metadata_stale
    assert state.pop_error() is None, "retried, not raised by poll()"

    plan = state.fetches_to_send(leaders, NOW)
    fetched = {
        (t.name, p.partition) for _, r in plan.requests for t in r.topics for p in t.partitions
    }
    assert T0 not in fetched, "not asked of the broker that refused it at once"
    assert plan.next_due_ms is not None and plan.next_due_ms <= NOW + BACKOFF_MS
    assert send(state, leaders, NOW + BACKOFF_MS - 1) == {}
    state.on_fetch_answer(1, broker_pb2.FetchResponse())  # the other partition's fetch
    assert T0 in send(state, leaders, NOW + BACKOFF_MS)[1]


def test_a_refused_partition_goes_to_a_new_leader_at_once() -> None:
    state = make()
    send(state, {T0: 1, T1: 1}, NOW)
    state.on_fetch_answer(1, refusal(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert send(state, {T0: 2, T1: 1}, NOW) == {2: {T0: 3}, 1: {T1: 7}}


def test_the_answer_names_the_new_leader_it_gave() -> None:
    state = make()
    send(state, {T0: 1, T1: 1}, NOW)
    effects = state.on_fetch_answer(1, refusal(ErrorCode.NOT_LEADER_OR_FOLLOWER, (2, 5)))
    assert effects.new_leaders == ((T0, 2, 5),)
    effects = make().on_fetch_answer(1, refusal(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert effects.new_leaders == ()


def test_the_consumer_driver_fetches_from_the_leader_a_refusal_names_at_once() -> None:
    """The metadata still names broker 1 (no refresh answers here): only the hint can send the
    partition to broker 2, and it does so with no backoff."""
    fetches: list[tuple[int, broker_pb2.FetchRequest, asyncio.Future]] = []

    class Metadata:
        def __init__(self) -> None:
            self.leaders = {T0: 1}
            self.leader_epochs = {T0: 4}
            self.topic_ids: dict[str, bytes] = {}
            self.endpoints = {1: "broker-1", 2: "broker-2"}

        def needs_refresh(self) -> bool:
            return False

        def mark_stale(self) -> None:
            pass

        def keep(self, topics: object) -> None:
            pass

        def update_leader(self, tp: tuple[str, int], leader_id: int, leader_epoch: int) -> bool:
            if leader_epoch <= self.leader_epochs.get(tp, -1):
                return False
            self.leaders = {**self.leaders, tp: leader_id}
            self.leader_epochs = {**self.leader_epochs, tp: leader_epoch}
            return True

    class Link:
        def __init__(self) -> None:
            self.node = 0

        async def fetch(self, channel: object, request: object, timeout_s: float) -> object:
            answer = asyncio.get_running_loop().create_future()
            fetches.append((self.node, request, answer))  # type: ignore[arg-type]
            return await answer

        def close(self) -> None:
            pass

    async def main() -> None:
        config = {"bootstrap.servers": "localhost:1", "auto.offset.reset": "latest"}
        driver = ConsumerDriver(ConsumerConfig.from_dict(config), Metadata(), lambda: None)  # type: ignore[arg-type]
        real_fetch = driver._fetch

        async def fetch(node: int, channel: object, request: broker_pb2.FetchRequest) -> None:
            link = driver._links.get(node) or Link()
            link.node = node  # type: ignore[attr-defined]
            driver._links[node] = link  # type: ignore[assignment]
            await real_fetch(node, channel, request)  # type: ignore[arg-type]

        driver._fetch = fetch  # type: ignore[method-assign]
        await driver.start()
        try:
            with driver.lock:
                driver.state.assign([T0])
                driver.state.seek(T0, 3)
            driver.wake()
            for _ in range(20):
                await asyncio.sleep(0)
            assert [node for node, _, _ in fetches] == [1]
            fetches.pop()[2].set_result(refusal(ErrorCode.NOT_LEADER_OR_FOLLOWER, (2, 5)))
            for _ in range(20):
                await asyncio.sleep(0)
            assert [node for node, _, _ in fetches] == [2], "asked of the leader named, now"
        finally:
            for _, _, pending in fetches:
                pending.cancel()
            await driver.stop()

    asyncio.run(main())

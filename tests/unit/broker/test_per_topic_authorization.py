"""Goal: with ACLs, Produce and Fetch answer a topic the caller may not WRITE / READ per
partition (TOPIC_AUTHORIZATION_FAILED, the message naming principal, operation and topic) while
the other topics of the same request are written / read, as Kafka does; a fetch session whose
topic loses READ answers that topic's partitions at the next fetch (even with no news for it)
instead of refusing the fetch; each topic is decided once per request, and nothing at all is
asked with ACLs off.

Method: the real produce and fetch cores (produce.py, fetch.py) on a real PartitionHost leading
topics `a` and `b` (tmp_path logs), with caller.TopicRefusals over a stand-in Caller whose
answers a test changes (a new grant object for each change, as the metadata image makes a new
ACLs object).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.metadata.acls import Operation, ResourceType
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch_answer
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.broker.requests.produce import produce
from samsa.services.runtime.caller import CALLER, TopicRefusals, topic_refusals
from samsa.services.runtime.session_access import SessionGrant
from samsa.v1 import broker_pb2

ALICE = "User:CN=alice"


class Alice:
    """A caller refused the topics in `refused`; `asked` counts the decisions."""

    def __init__(self, *refused: str) -> None:
        self.refused = set(refused)
        self.asked: list[tuple[Operation, str]] = []
        self.acls = object()  # stands for the image's ACLs object: a new one per change

    def may(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        assert resource_type == ResourceType.TOPIC
        self.asked.append((operation, name))
        return name not in self.refused

    def principal(self) -> str:
        return ALICE

    def grant(self) -> SessionGrant:
        return SessionGrant(self.acls, ALICE, "127.0.0.1")  # type: ignore[arg-type]

    def revoke(self, topic: str) -> None:
        self.refused.add(topic)
        self.acls = object()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    topics = {"a": (b"\x01" * 16, led_partitions(2)), "b": (b"\x02" * 16, led_partitions(2))}
    with hosting(tmp_path, single_broker_image(topics)) as host:
        yield host


def produce_request(*topics: str) -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(acks=1)
    for name in topics:
        topic = request.topics.add(name=name)
        for partition in (0, 1):
            topic.partitions.add(partition=partition, records=build_batch([b"v"]))
    return request


def errors(response: broker_pb2.ProduceResponse | broker_pb2.FetchResponse) -> dict:
    return {
        (topic.name, p.partition): (p.error_code, p.error_message)
        for topic in response.topics
        for p in topic.partitions
    }


def test_produce_writes_the_allowed_topic_and_refuses_the_other_per_partition(
    host: PartitionHost,
) -> None:
    alice = Alice("b")
    refusals = TopicRefusals(alice, Operation.WRITE)
    response, _ = produce(host, produce_request("a", "b"), 0, refused_topics=refusals)
    answered = errors(response)
    assert answered[("a", 0)] == (ErrorCode.NONE, "")
    assert answered[("a", 1)] == (ErrorCode.NONE, "")
    for partition in (0, 1):
        code, message = answered[("b", partition)]
        assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert ALICE in message and "WRITE topic b" in message
    assert host.get("a", 0).log.log_end_offset == 1  # type: ignore[union-attr]
    assert host.get("b", 0).log.log_end_offset == 0  # type: ignore[union-attr]
    assert sorted(alice.asked) == [(Operation.WRITE, "a"), (Operation.WRITE, "b")]  # once each


def fetch_request(*topics: str, session_id: int = 0, epoch: int = -1) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    if epoch >= 0:
        request.session_id, request.session_epoch = session_id, epoch
    for name in topics:
        topic = request.topics.add(name=name)
        for partition in (0, 1):
            topic.partitions.add(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)
    return request


def append(host: PartitionHost, topic: str) -> None:
    hosted = host.get(topic, 0)
    assert hosted is not None
    hosted.log.append_as_leader(build_batch([b"v"]), leader_epoch=0, now_ms=0)
    hosted.notify_appended()
    hosted.advance_high_watermark()


def test_a_sessionless_fetch_reads_the_allowed_topic_and_refuses_the_other(
    host: PartitionHost,
) -> None:
    append(host, "a")
    append(host, "b")
    alice = Alice("b")
    refusals = TopicRefusals(alice, Operation.READ)
    answer = asyncio.run(fetch_answer(host, fetch_request("a", "b"), None, None, refusals))
    answered = errors(answer.response)
    assert answered[("a", 0)][0] == ErrorCode.NONE
    assert ("a", 0) in answer.records
    assert answered[("b", 0)][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert "READ topic b" in answered[("b", 0)][1]
    assert not [key for key in answer.records if key[0] == "b"]
    assert sorted(alice.asked) == [(Operation.READ, "a"), (Operation.READ, "b")]


def test_a_session_whose_topic_loses_read_answers_it_at_the_next_fetch(
    host: PartitionHost,
) -> None:
    alice = Alice()
    sessions = FetchSessionCache()

    async def scenario() -> tuple[broker_pb2.FetchResponse, broker_pb2.FetchResponse, dict]:
        refusals = TopicRefusals(alice, Operation.READ)
        opened = await fetch_answer(
            host, fetch_request("a", "b", epoch=0), sessions, None, refusals
        )
        session_id = opened.response.session_id
        steady = await fetch_answer(
            host,
            fetch_request(session_id=session_id, epoch=1),
            sessions,
            None,
            TopicRefusals(alice, Operation.READ),
        )
        alice.revoke("b")
        append(host, "a")
        refused = await fetch_answer(
            host,
            fetch_request(session_id=session_id, epoch=2),
            sessions,
            None,
            TopicRefusals(alice, Operation.READ),
        )
        return steady.response, refused.response, refused.records

    steady, refused, records = asyncio.run(scenario())
    assert errors(steady) == {}  # nothing new, nothing refused
    answered = errors(refused)
    # b had no news, yet is answered: the ACLs changed; a's new record is read alike.
    assert answered[("b", 0)][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert answered[("b", 1)][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert answered[("a", 0)][0] == ErrorCode.NONE and ("a", 0) in records
    assert refused.error_code == ErrorCode.NONE


def test_the_session_is_walked_only_when_the_grant_changes(host: PartitionHost) -> None:
    alice = Alice()
    sessions = FetchSessionCache()

    async def fetches(count: int) -> None:
        opened = await fetch_answer(
            host,
            fetch_request("a", "b", epoch=0),
            sessions,
            None,
            TopicRefusals(alice, Operation.READ),
        )
        for epoch in range(1, count):
            await fetch_answer(
                host,
                fetch_request(session_id=opened.response.session_id, epoch=epoch),
                sessions,
                None,
                TopicRefusals(alice, Operation.READ),
            )

    asyncio.run(fetches(4))
    # The opening fetch reads a and b; the walk under its grant decides them once; then nothing.
    assert len(alice.asked) <= 4, alice.asked


def test_acls_off_ask_nothing() -> None:
    assert topic_refusals(Operation.WRITE) is None  # EVERYONE: the cores skip every check
    alice = Alice("b")
    token = CALLER.set(alice)
    try:
        refusals = topic_refusals(Operation.READ)
        assert refusals is not None and refusals("b") is not None and refusals("a") is None
    finally:
        CALLER.reset(token)

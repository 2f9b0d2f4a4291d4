"""Goal: Produce, Fetch and ListOffsets name the topic's id (KIP-516, broker.proto's
TopicData.topic_id), so a broker behind on metadata, still hosting a deleted topic of the same
name, neither serves the old topic's records (or its offsets) to a client of the new one nor
writes the new topic's records into the old log (which vanishes when the broker applies the
deletion). Leader epochs cannot tell: a new topic's restart at 0. A partition whose hosted id
differs answers UNKNOWN_TOPIC_ID (both ids in hex, nothing read or written); an empty id is not
checked, as before.

Method: real logs in tmp_path hosted from hand-made images (broker_host.py): topic "t" hosted
under OLD_ID, asked for under NEW_ID; the produce, fetch and list-offsets adapters called directly,
sessionless and in a fetch session, as leader and as a follower serving a consumer (KIP-392).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_host import hosting, led_partitions, single_broker_image, two_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import fetch, read_once
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.broker.requests.list_offsets import list_offsets
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2 as b

OLD_ID, NEW_ID = b"\x0a" * 16, b"\x0b" * 16


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    """Broker 1 leading "t"-0 under OLD_ID, holding one record of the old topic."""
    with hosting(tmp_path, single_broker_image({"t": (OLD_ID, led_partitions(1))})) as hosted:
        answer, _ = produce(hosted, produce_request(b"old", topic_id=b""), 5)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE
        yield hosted


def produce_request(value: bytes, topic_id: bytes, topic: str = "t") -> b.ProduceRequest:
    data = b.ProduceRequest.PartitionData(partition=0, records=build_batch([value]))
    return b.ProduceRequest(
        acks=1,
        topics=[b.ProduceRequest.TopicData(name=topic, topic_id=topic_id, partitions=[data])],
    )


def fetch_request(topic_id: bytes, topic: str = "t", **fields: object) -> b.FetchRequest:
    wanted = b.FetchRequest.PartitionData(partition=0, fetch_offset=0)
    return b.FetchRequest(
        topics=[b.FetchRequest.TopicData(name=topic, topic_id=topic_id, partitions=[wanted])],
        **fields,  # type: ignore[arg-type]
    )


def assert_unknown_topic_id(result: Any, asked: bytes, known: bytes | None) -> None:
    """`result`: a Produce or Fetch PartitionResponse."""
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_ID, result.error_message
    message = result.error_message
    assert asked.hex() in message and (known is None or known.hex() in message), message


@pytest.mark.parametrize("topic_id", [b"", OLD_ID])
def test_a_fetch_naming_the_hosted_id_or_none_is_served(host, topic_id):
    response, _, _ = read_once(host, fetch_request(topic_id))
    result = response.topics[0].partitions[0]
    assert result.error_code == ErrorCode.NONE and result.records


def test_a_fetch_naming_another_topic_id_gets_none_of_the_old_records(host):
    response, _, _ = read_once(host, fetch_request(NEW_ID))
    result = response.topics[0].partitions[0]
    assert_unknown_topic_id(result, NEW_ID, OLD_ID)
    assert not result.records and result.next_fetch_offset == 0


def test_a_produce_naming_another_topic_id_writes_nothing(host):
    answer, waits = produce(host, produce_request(b"new", NEW_ID), 5)
    result = answer.topics[0].partitions[0]
    assert_unknown_topic_id(result, NEW_ID, OLD_ID)
    assert result.base_offset == -1 and waits == []
    hosted = host.get("t", 0)
    assert hosted is not None and hosted.log.log_end_offset == 1, "written into the old log"


def test_a_produce_naming_the_hosted_id_is_written(host):
    answer, _ = produce(host, produce_request(b"more", OLD_ID), 5)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert answer.topics[0].partitions[0].base_offset == 1


def test_a_topic_unknown_here_answers_unknown_topic_id_when_an_id_is_named(host):
    """The broker has applied the deletion but not the re-creation yet (or never heard of the
    topic): with an id the client knows the topic exists, and the broker is the one behind."""
    answer, _ = produce(host, produce_request(b"x", NEW_ID, topic="u"), 5)
    assert_unknown_topic_id(answer.topics[0].partitions[0], NEW_ID, None)
    assert "no topic of that name" in answer.topics[0].partitions[0].error_message
    response, _, _ = read_once(host, fetch_request(b"", topic="u"))
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_follower_serving_a_consumer_checks_the_topic_id(tmp_path):
    """KIP-392: a replica that does not lead serves consumers up to its high watermark; that
    fallback must not skip the id check."""
    with hosting(tmp_path, two_broker_image(OLD_ID, 1), broker_id=2) as follower:
        response, _, _ = read_once(follower, fetch_request(OLD_ID))
        assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
        response, _, _ = read_once(follower, fetch_request(NEW_ID))
        assert_unknown_topic_id(response.topics[0].partitions[0], NEW_ID, OLD_ID)


def test_a_fetch_session_keeps_and_updates_each_partitions_topic_id(host):
    """The session remembers the id of the request that last named the partition: an
    incremental fetch that names nothing still checks it, and one naming a new id checks that."""
    sessions = FetchSessionCache()

    async def scenario() -> list[b.FetchResponse]:
        opened = await fetch(host, fetch_request(OLD_ID, session_id=0, session_epoch=0), sessions)
        session_id = opened.session_id
        renamed = await fetch(
            host, fetch_request(NEW_ID, session_id=session_id, session_epoch=1), sessions
        )
        idle = b.FetchRequest(session_id=session_id, session_epoch=2)
        host.get("t", 0).notify_appended()  # type: ignore[union-attr]  # a change: re-read
        again = await fetch(host, idle, sessions)
        return [opened, renamed, again]

    opened, renamed, again = asyncio.run(scenario())
    assert opened.topics[0].partitions[0].records
    assert_unknown_topic_id(renamed.topics[0].partitions[0], NEW_ID, OLD_ID)
    assert_unknown_topic_id(again.topics[0].partitions[0], NEW_ID, OLD_ID)
    assert not renamed.topics[0].partitions[0].records and not again.topics[0].partitions[0].records


@pytest.mark.parametrize(
    "spec", [b.OFFSET_SPEC_EARLIEST, b.OFFSET_SPEC_LATEST, b.OFFSET_SPEC_MAX_TIMESTAMP]
)
def test_list_offsets_naming_another_topic_id_answers_none_of_the_old_logs_offsets(host, spec):
    """A consumer of the re-created topic resetting its position (auto.offset.reset,
    seek_to_end, offsets_for_times) must not be handed the old log's offsets; with the hosted
    id, or none, the offsets are answered as before."""

    def ask(topic_id: bytes) -> b.ListOffsetsResponse.PartitionResponse:
        wanted = b.ListOffsetsRequest.PartitionData(partition=0, offset_spec=spec)
        topic = b.ListOffsetsRequest.TopicData(name="t", topic_id=topic_id, partitions=[wanted])
        return list_offsets(host, b.ListOffsetsRequest(topics=[topic])).topics[0].partitions[0]

    refused = ask(NEW_ID)
    assert_unknown_topic_id(refused, NEW_ID, OLD_ID)
    assert refused.offset == -1 and refused.leader_epoch == -1
    for topic_id in (b"", OLD_ID):
        answered = ask(topic_id)
        assert answered.error_code == ErrorCode.NONE and answered.offset in (0, 1)


MALFORMED_IDS = [b"\x0a" * 3, b"\x0a" * 15, b"\x0a" * 17]


def assert_malformed_topic_id(result: Any, asked: bytes) -> None:
    """INVALID_REQUEST (not retriable), not UNKNOWN_TOPIC_ID: no refresh makes the id right."""
    assert result.error_code == ErrorCode.INVALID_REQUEST, result.error_message
    assert f"has {len(asked)} bytes" in result.error_message, result.error_message


@pytest.mark.parametrize("topic_id", MALFORMED_IDS)
def test_a_topic_id_not_16_bytes_is_refused_as_invalid_everywhere(host, topic_id):
    """A buggy client's id (truncated, padded, hex text) is the request's fault: answered
    UNKNOWN_TOPIC_ID, it would be retried after every metadata refresh, told the topic was
    deleted and created again. Nothing is written, read or looked up."""
    answer, waits = produce(host, produce_request(b"x", topic_id), 5)
    assert_malformed_topic_id(answer.topics[0].partitions[0], topic_id)
    assert waits == [] and host.get("t", 0).log.log_end_offset == 1  # type: ignore[union-attr]
    response, _, _ = read_once(host, fetch_request(topic_id))
    assert_malformed_topic_id(response.topics[0].partitions[0], topic_id)
    assert not response.topics[0].partitions[0].records
    wanted = b.ListOffsetsRequest.PartitionData(partition=0, offset_spec=b.OFFSET_SPEC_LATEST)
    topic = b.ListOffsetsRequest.TopicData(name="t", topic_id=topic_id, partitions=[wanted])
    listed = list_offsets(host, b.ListOffsetsRequest(topics=[topic])).topics[0].partitions[0]
    assert_malformed_topic_id(listed, topic_id)
    assert listed.offset == -1


def test_a_follower_serving_a_consumer_refuses_a_malformed_topic_id(tmp_path):
    """KIP-392's fallback (any replica serves consumers) must not serve the records of a
    request whose id was refused as malformed."""
    with hosting(tmp_path, two_broker_image(OLD_ID, 1), broker_id=2) as follower:
        response, _, _ = read_once(follower, fetch_request(OLD_ID[:8]))
        assert_malformed_topic_id(response.topics[0].partitions[0], OLD_ID[:8])
        assert not response.topics[0].partitions[0].records

"""Goal: only members of the cluster write internal topics (`__consumer_offsets`, the
coordinators' group state). A Produce or a ProduceStream without a member's proof, or with a bad
one (another secret, signed for another call), is refused for the internal topic's partitions
alone — INVALID_REQUEST, a message saying why, nothing written — while the request's other
partitions are appended; a Produce signed exactly as a coordinator signs it, and a ProduceStream
opened with the proof a coordinator's stream carries (services/coordinator/offsets_log.py), are
appended.

Method: a PartitionHost over real logs in a temp dir leading one ordinary topic and
`__consumer_offsets`; the pure `produce`, the BrokerServicer's Produce and the ProduceStream
handler are driven with a fake servicer context carrying the call's metadata.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.produce import produce
from samsa.services.broker.requests.produce_stream import serve_produce_stream
from samsa.services.broker.servicer import BrokerServicer
from samsa.services.runtime import membership
from samsa.services.runtime.member_auth import MemberSigner
from samsa.v1 import broker_pb2 as b

KEY = membership.derive_key("a" * 43)
OTHER_KEY = membership.derive_key("b" * 43)
BROKER_SERVICE = b.DESCRIPTOR.services_by_name["BrokerService"].full_name
PRODUCE = membership.method_path(BROKER_SERVICE, "Produce")
PRODUCE_STREAM = membership.method_path(BROKER_SERVICE, "ProduceStream")
TOPICS = {"t": b"\x01" * 16, CONSUMER_OFFSETS_TOPIC: b"\x02" * 16}


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    image = single_broker_image(
        {name: (topic_id, led_partitions(1)) for name, topic_id in TOPICS.items()}
    )
    with hosting(tmp_path, image) as hosted:
        yield hosted


def request() -> b.ProduceRequest:
    """One record to the ordinary topic and one to the internal one."""
    return b.ProduceRequest(
        acks=1,
        topics=[
            b.ProduceRequest.TopicData(
                name=name,
                partitions=[
                    b.ProduceRequest.PartitionData(partition=0, records=build_batch([b"v"]))
                ],
            )
            for name in TOPICS
        ],
    )


class FakeContext:
    """What the Produce handlers use of grpc.aio.ServicerContext: metadata, and abort."""

    def __init__(self, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self.metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AssertionError(f"aborted {code}: {details}")


def results(response: b.ProduceResponse) -> dict[str, b.ProduceResponse.PartitionResponse]:
    return {topic.name: topic.partitions[0] for topic in response.topics}


def log_end(host: PartitionHost, topic: str) -> int:
    return host.get(topic, 0).log.log_end_offset


def assert_refused(result: b.ProduceResponse.PartitionResponse, reason: str) -> None:
    assert result.error_code == ErrorCode.INVALID_REQUEST and result.base_offset == -1
    assert result.error_message.startswith(
        "__consumer_offsets is internal: only the cluster's coordinators write it (with the "
        "membership proof); "
    ), result.error_message
    assert reason in result.error_message and "nothing was written" in result.error_message


def servicer_produce(host: PartitionHost, metadata: tuple[tuple[str, str], ...]):  # type: ignore[no-untyped-def]
    servicer = BrokerServicer(host, member_key=KEY, producer_ids=None)  # type: ignore[arg-type]
    return results(asyncio.run(servicer.Produce(request(), FakeContext(metadata))))


def test_produce_refuses_internal_partitions_unless_told_the_caller_is_a_member(host):
    refused = results(produce(host, request(), 5)[0])
    assert refused["t"].error_code == ErrorCode.NONE, "the other partition is unaffected"
    assert_refused(refused[CONSUMER_OFFSETS_TOPIC], "does not prove it comes from a member")
    assert (log_end(host, "t"), log_end(host, CONSUMER_OFFSETS_TOPIC)) == (1, 0)

    allowed = results(produce(host, request(), 5, internal_write_refusal=None)[0])
    assert allowed[CONSUMER_OFFSETS_TOPIC].error_code == ErrorCode.NONE
    assert log_end(host, CONSUMER_OFFSETS_TOPIC) == 1


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ((), "the request carries no samsa-member-auth metadata"),
        (MemberSigner(OTHER_KEY, 1).metadata(PRODUCE), "another cluster secret"),
        (
            MemberSigner(KEY, 1).metadata(membership.method_path(BROKER_SERVICE, "Fetch")),
            "for another call",
        ),
        (((membership.METADATA_KEY, "v1.garbage"),), "is not v1.<member id>"),
    ],
)
def test_an_unproven_produce_writes_nothing_to_the_internal_topic(host, metadata, reason):
    answered = servicer_produce(host, metadata)
    assert answered["t"].error_code == ErrorCode.NONE
    assert_refused(answered[CONSUMER_OFFSETS_TOPIC], reason)
    assert log_end(host, CONSUMER_OFFSETS_TOPIC) == 0


@pytest.mark.parametrize("member_id", [1, 7])
def test_a_produce_signed_as_a_coordinator_writes_the_internal_topic(host, member_id):
    # Exactly the metadata a coordinator sends; whichever member id the proof names.
    answered = servicer_produce(host, MemberSigner(KEY, member_id).metadata(PRODUCE))
    assert answered[CONSUMER_OFFSETS_TOPIC].error_code == ErrorCode.NONE
    assert answered[CONSUMER_OFFSETS_TOPIC].base_offset == 0
    assert (log_end(host, "t"), log_end(host, CONSUMER_OFFSETS_TOPIC)) == (1, 1)


def stream_produce(host: PartitionHost, metadata: tuple[tuple[str, str], ...]):  # type: ignore[no-untyped-def]
    """One request over the servicer's ProduceStream opened with `metadata`: its answers."""

    async def requests():  # type: ignore[no-untyped-def]
        yield b.ProduceStreamRequest(correlation_id=3, request=request())

    async def answers() -> list[b.ProduceStreamResponse]:
        servicer = BrokerServicer(host, member_key=KEY, producer_ids=None)  # type: ignore[arg-type]
        stream = servicer.ProduceStream(requests(), FakeContext(metadata))
        return [a async for a in stream]

    (answer,) = asyncio.run(answers())
    assert answer.correlation_id == 3
    return results(answer.response)


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ((), "the stream carries no membership proof"),
        (MemberSigner(OTHER_KEY, 1).metadata(PRODUCE_STREAM), "another cluster secret"),
        # A proof for the unary call does not open a stream: proofs are per method.
        (MemberSigner(KEY, 1).metadata(PRODUCE), "for another call"),
    ],
)
def test_an_unproven_produce_stream_writes_nothing_to_the_internal_topic(host, metadata, reason):
    answered = stream_produce(host, metadata)
    assert answered["t"].error_code == ErrorCode.NONE
    assert_refused(answered[CONSUMER_OFFSETS_TOPIC], reason)
    assert log_end(host, CONSUMER_OFFSETS_TOPIC) == 0


def test_a_produce_stream_opened_by_a_coordinator_writes_the_internal_topic(host):
    answered = stream_produce(host, MemberSigner(KEY, 7).metadata(PRODUCE_STREAM))
    assert answered[CONSUMER_OFFSETS_TOPIC].error_code == ErrorCode.NONE
    assert (log_end(host, "t"), log_end(host, CONSUMER_OFFSETS_TOPIC)) == (1, 1)


def test_the_stream_core_refuses_internal_topics_unless_told_otherwise(host):
    async def requests():  # type: ignore[no-untyped-def]
        yield b.ProduceStreamRequest(correlation_id=3, request=request())

    async def answers() -> list[b.ProduceStreamResponse]:
        signed = FakeContext(MemberSigner(KEY, 1).metadata(PRODUCE_STREAM))
        return [a async for a in serve_produce_stream(host, requests(), signed)]  # type: ignore[arg-type]

    (answer,) = asyncio.run(answers())
    assert_refused(results(answer.response)[CONSUMER_OFFSETS_TOPIC], "carries no membership proof")
    assert log_end(host, CONSUMER_OFFSETS_TOPIC) == 0

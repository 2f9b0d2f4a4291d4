"""Goal: the current_leader_epoch checks of Fetch and ListOffsets (KIP-320) as broker.proto
states them: an older epoch answers FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, the
current one (and unset or -1: "not checked") answers normally.

Method: a real log in a temp dir, led at leader epoch 3, read with each kind of epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.fetch import read_once
from samsa.services.broker.requests.list_offsets import list_offsets
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2

TOPIC_ID = b"\x0c" * 16
LEADER_EPOCH = 3
CASES = [
    (None, ErrorCode.NONE),
    (-1, ErrorCode.NONE),
    (LEADER_EPOCH, ErrorCode.NONE),
    (LEADER_EPOCH - 1, ErrorCode.FENCED_LEADER_EPOCH),
    (LEADER_EPOCH + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    partitions = led_partitions(1, epoch=LEADER_EPOCH)
    with hosting(tmp_path, single_broker_image({"t": (TOPIC_ID, partitions)})) as hosted:
        data = broker_pb2.ProduceRequest.PartitionData(partition=0, records=build_batch([b"a"]))
        topic = broker_pb2.ProduceRequest.TopicData(name="t", partitions=[data])
        answer, _ = produce(hosted, broker_pb2.ProduceRequest(acks=1, topics=[topic]), 5)
        assert answer.topics[0].partitions[0].error_code == 0
        yield hosted


@pytest.mark.parametrize(("epoch", "code"), CASES)
def test_fetch_checks_the_current_leader_epoch(host, epoch, code):
    wanted = broker_pb2.FetchRequest.PartitionData(partition=0, fetch_offset=0)
    if epoch is not None:
        wanted.current_leader_epoch = epoch
    request = broker_pb2.FetchRequest(
        topics=[broker_pb2.FetchRequest.TopicData(name="t", partitions=[wanted])]
    )
    response, _, _ = read_once(host, request)
    result = response.topics[0].partitions[0]
    assert result.error_code == code, result.error_message
    assert bool(result.records) == (code == ErrorCode.NONE)


@pytest.mark.parametrize(("epoch", "code"), CASES)
def test_list_offsets_checks_the_current_leader_epoch(host, epoch, code):
    wanted = broker_pb2.ListOffsetsRequest.PartitionData(
        partition=0, offset_spec=broker_pb2.OFFSET_SPEC_LATEST
    )
    if epoch is not None:
        wanted.current_leader_epoch = epoch
    request = broker_pb2.ListOffsetsRequest(
        topics=[broker_pb2.ListOffsetsRequest.TopicData(name="t", partitions=[wanted])]
    )
    result = list_offsets(host, request).topics[0].partitions[0]
    assert result.error_code == code, result.error_message
    assert result.offset == (1 if code == ErrorCode.NONE else -1)


def test_a_fenced_fetch_names_the_current_leader(host):
    """broker.proto (KIP-951): FENCED_LEADER_EPOCH carries current_leader when a leader is
    known, so that a client goes on at once rather than after a metadata refresh."""
    wanted = broker_pb2.FetchRequest.PartitionData(
        partition=0, fetch_offset=0, current_leader_epoch=LEADER_EPOCH - 1
    )
    request = broker_pb2.FetchRequest(
        topics=[broker_pb2.FetchRequest.TopicData(name="t", partitions=[wanted])]
    )
    response, _, _ = read_once(host, request)
    result = response.topics[0].partitions[0]
    assert result.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert result.HasField("current_leader")
    assert (result.current_leader.leader_id, result.current_leader.leader_epoch) == (
        1,
        LEADER_EPOCH,
    )

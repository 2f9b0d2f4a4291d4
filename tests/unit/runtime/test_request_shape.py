"""Goal: no request, however small on the wire, parses into more than request_shape.ELEMENTS_MAX
objects: one 80 MiB request of empty entries parsed into ~2 GB (about 50 bytes of memory per
two-byte entry) before any handler could count them. And the count costs a legitimate large
request (records travel as one bytes field) one step per field: its records are skipped by their
length, never looked into.

Method: the pure `elements_problem` on crafted wire bytes: empty entries at the top level and
nested, packed and unpacked repeated scalars, a maximal-size records field (its steps counted by
lowering STEPS_MAX, not timed: speed is for bench/), malformed bytes. The guard's use of it, over
a real server, is in test_rpc_guard.py.
"""

from __future__ import annotations

import pytest
from wire_fields import length_delimited

from samsa.services.runtime import request_shape
from samsa.services.runtime.request_shape import ELEMENTS_MAX, elements_problem
from samsa.v1 import broker_pb2, controller_pb2, coordinator_pb2


def _field(message: type, name: str) -> int:
    return message.DESCRIPTOR.fields_by_name[name].number


def _empty_topics(count: int) -> bytes:
    return length_delimited(_field(broker_pb2.FetchRequest, "topics"), b"") * count


def test_a_request_of_empty_entries_is_refused_before_it_is_parsed() -> None:
    raw = _empty_topics(ELEMENTS_MAX + 1)
    problem = elements_problem(broker_pb2.FetchRequest.DESCRIPTOR, raw)
    assert problem is not None
    assert f"at most {ELEMENTS_MAX}" in problem and str(len(raw)) in problem
    assert elements_problem(broker_pb2.FetchRequest.DESCRIPTOR, _empty_topics(ELEMENTS_MAX)) is None


def test_nested_entries_count_too() -> None:
    partitions = _field(broker_pb2.ProduceRequest.TopicData, "partitions")
    inner = bytes([(partitions << 3) | 2, 0]) * (ELEMENTS_MAX // 2 + 1)
    topics = _field(broker_pb2.ProduceRequest, "topics")
    one_topic = length_delimited(topics, inner)
    raw = one_topic * 2
    assert elements_problem(broker_pb2.ProduceRequest.DESCRIPTOR, raw) is not None


def test_repeated_scalars_count_packed_or_not() -> None:
    names = controller_pb2.DeleteTopicsRequest.DESCRIPTOR.fields_by_name["names"]
    assert names.message_type is None  # strings: an empty one parses into ~45 bytes, counted
    raw = length_delimited(names.number, b"") * (ELEMENTS_MAX + 1)
    assert elements_problem(controller_pb2.DeleteTopicsRequest.DESCRIPTOR, raw) is not None
    raw = length_delimited(names.number, b"") * ELEMENTS_MAX
    assert elements_problem(controller_pb2.DeleteTopicsRequest.DESCRIPTOR, raw) is None
    # OffsetDelete's partitions are a repeated int32: a packed run of 1-byte varints.
    topic = coordinator_pb2.OffsetDeleteRequest.DESCRIPTOR.fields_by_name["topics"]
    wanted = topic.message_type.fields_by_name["partitions"]
    packed = bytes(ELEMENTS_MAX + 1)
    inner = length_delimited(wanted.number, packed)
    raw = length_delimited(topic.number, inner)
    assert elements_problem(coordinator_pb2.OffsetDeleteRequest.DESCRIPTOR, raw) is not None
    unpacked = bytes([wanted.number << 3, 0]) * (ELEMENTS_MAX + 1)
    raw = length_delimited(topic.number, unpacked)
    assert elements_problem(coordinator_pb2.OffsetDeleteRequest.DESCRIPTOR, raw) is not None


def test_a_maximal_batch_costs_one_step_per_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """Walked into, its 64 MiB of zero bytes would be 32 Mi two-byte fields (steps); skipped, the
    request is its 5 fields. The walk passes with STEPS_MAX at 5 and stops at 4: the second check
    also shows that the walk reads the lowered bound, so the first one can fail."""
    request = broker_pb2.ProduceRequest(
        acks=-1,
        topics=[
            broker_pb2.ProduceRequest.TopicData(
                name="t",
                partitions=[
                    broker_pb2.ProduceRequest.PartitionData(partition=0, records=bytes(64 << 20))
                ],
            )
        ],
    )
    raw = request.SerializeToString()
    fields = 5  # acks, topics, the topic's name and partitions, records (partition 0 is not sent)
    monkeypatch.setattr(request_shape, "STEPS_MAX", fields)
    assert elements_problem(broker_pb2.ProduceRequest.DESCRIPTOR, raw) is None
    monkeypatch.setattr(request_shape, "STEPS_MAX", fields - 1)
    problem = elements_problem(broker_pb2.ProduceRequest.DESCRIPTOR, raw)
    assert problem is not None
    assert f"over {fields - 1} fields" in problem


def test_bytes_that_are_not_protobuf_are_left_to_the_parser() -> None:
    raw = b"\xff" * (ELEMENTS_MAX + 10)
    assert elements_problem(broker_pb2.FetchRequest.DESCRIPTOR, raw) is None
    # Empty entries, then garbage: the parser would build them all before failing.
    raw = _empty_topics(ELEMENTS_MAX + 1) + b"\xff\xff\xff"
    assert elements_problem(broker_pb2.FetchRequest.DESCRIPTOR, raw) is not None

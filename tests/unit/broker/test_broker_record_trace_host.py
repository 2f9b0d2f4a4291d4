"""Goal: the broker's record-trace spans (record_trace.py) tell where a traced batch went as the
broker hosting it sees it: a batch its log lost to a truncation gets no later span, though other
records take its offsets; a consumer fetch that long-polls gets one `fetch` span for its one
answer, however many passes it read before answering.

Method: a PartitionHost over a real log in tmp_path, following images from the controller's own
decisions (replication_cluster's builders), with a RecordTracer over an in-memory exporter; the
produce and fetch go through the request code (`produce`, `PartitionReader`).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from samsa.common.fetch_session_client import FetchParts, FetchPosition, fetch_request
from samsa.common.record.codec import build_batch
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.record_trace import RecordTracer
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.services.broker.requests.produce import produce
from samsa.services.controller import control_plane as cp
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_cluster import KEY, TOPIC, cluster_with_topic, commit

SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def traced(host: PartitionHost, broker_id: int) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host.record_tracer = RecordTracer(provider.get_tracer("test"), lambda: 1, broker_id)
    return exporter


def traced_produce(host: PartitionHost, values: list[bytes]) -> None:
    """An acks=1 produce of `values` to TOPIC-0 carrying a sampled record's context."""
    assert host.record_tracer is not None
    request = broker_pb2.ProduceRequest(acks=1)
    request.topics.add(name=TOPIC).partitions.add(partition=0, records=build_batch(values))
    span = host.record_tracer.start_produce(SAMPLED, request)
    assert span is not None
    response, _ = produce(
        host, request, 0, internal_write_refusal=None, trace_parent=span.get_span_context()
    )
    assert response.topics[0].partitions[0].error_code == 0
    span.end()


def consumer_pass(host: PartitionHost, offset: int) -> PartitionReader:
    """One pass of a consumer's fetch of TOPIC-0 from `offset`, counted as answered."""
    parts = FetchParts(0, -1, True, {KEY: FetchPosition(offset, -1, -1, 1 << 20)}, ())
    request = fetch_request(parts, max_wait_ms=0, min_bytes=1)
    reader = PartitionReader(host, request, 0)
    answer = broker_pb2.FetchResponse.PartitionResponse(partition=0)
    for topic in request.topics:
        for wanted in topic.partitions:
            reader.read(topic.name, wanted, answer)
    assert answer.error_code == 0, answer
    reader.count_answer()
    return reader


def test_a_traced_batch_truncated_away_gets_no_later_span(tmp_path: Path) -> None:
    """The leader appends a traced batch and loses the leadership before any follower has it;
    the new leader's log holds other records at its offsets, so this replica truncates and
    takes them. A consumer reading them here (KIP-392) is not reading the traced record: no
    `fetch` span joins its trace (one did, as if the lost record had been delivered)."""
    image = cluster_with_topic({}, random.Random(1))
    me = image.topics[TOPIC].partitions[0].leader
    host = PartitionHost(tmp_path, me)
    host.apply(image, partition_changes(host.image, image, me), now_ms=0)
    exporter = traced(host, me)
    traced_produce(host, [b"lost"])

    image = commit(image, cp.fence_brokers(image, [me]))
    host.apply(image, partition_changes(host.image, image, me), now_ms=0)
    hosted = host.get(*KEY)
    assert hosted is not None and not hosted.is_leader
    hosted.log.truncate_to(0)  # as a diverging-epoch answer has it do (follower_apply.py)
    hosted.log_changed()
    epoch = image.topics[TOPIC].partitions[0].leader_epoch
    hosted.log.append_as_follower(
        build_batch([b"x", b"y", b"z"], partition_leader_epoch=epoch), now_ms=0
    )
    hosted.take_leader_high_watermark(3)

    consumer_pass(host, 0)
    host.close_all()
    assert [span.name for span in exporter.get_finished_spans()] == [
        f"append {TOPIC}-0",
        f"produce {TOPIC}",
    ]


def test_a_long_polled_consumer_fetch_gets_one_fetch_span(tmp_path: Path) -> None:
    """A consumer's fetch with fewer bytes than its min_bytes reads the partition, waits, and
    reads it again before it answers (here when max_wait_ms runs out): the traced batch goes out
    in one answer, which is one `fetch` span (each pass made one, the unanswered one too)."""
    image = cluster_with_topic({"min.insync.replicas": "1"}, random.Random(1))
    state = image.topics[TOPIC].partitions[0]
    me = state.leader
    image = commit(image, cp.fence_brokers(image, [r for r in state.replicas if r != me]))
    host = PartitionHost(tmp_path, me)
    host.apply(image, partition_changes(host.image, image, me), now_ms=0)
    hosted = host.get(*KEY)
    assert hosted is not None and hosted.isr == (me,)
    exporter = traced(host, me)
    traced_produce(host, [b"v"])
    assert hosted.high_watermark == 1

    parts = FetchParts(0, -1, True, {KEY: FetchPosition(0, -1, -1, 1 << 20)}, ())
    request = fetch_request(parts, max_wait_ms=50, min_bytes=1 << 20)
    answer = asyncio.run(fetch(host, request))
    host.close_all()
    assert answer.topics[0].partitions[0].records, "the batch is in the answer"
    names = [span.name for span in exporter.get_finished_spans()]
    assert names.count(f"fetch {TOPIC}-0") == 1, names

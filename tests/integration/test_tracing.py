"""OpenTelemetry: with OTEL_TRACES_EXPORTER set, each RPC is a span continuing the caller's W3C
trace context; without it, services run with no tracing at all. Method: a one-broker cluster with
the file exporter; one RPC with a known `traceparent`; after a clean stop (exporting is batched),
the span is a line of the span file, and the broker's log holds JSON lines only."""

from __future__ import annotations

import json

import grpc
import pytest
from cluster_helpers import local_cluster

from samsa.common.span_file import read_spans
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(180)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def test_an_rpc_span_continues_the_callers_trace(tmp_path, monkeypatch):
    traces = tmp_path / "traces.jsonl"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "file")
    monkeypatch.setenv("SAMSA_TRACES_FILE", str(traces))
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        channel = grpc.insecure_channel(cluster.spec.brokers[0].endpoint)
        request = broker_pb2.ListOffsetsRequest(
            topics=[broker_pb2.ListOffsetsRequest.TopicData(name="nope", partitions=[])]
        )
        broker_pb2_grpc.BrokerServiceStub(channel).ListOffsets(
            request, metadata=[("traceparent", TRACEPARENT)], timeout=10
        )
        channel.close()
        cluster.stop_all()  # exporting is batched: a clean stop flushes the spans
        log = (tmp_path / "logs" / "broker-1.log").read_text()
    spans = [span for span in read_spans([str(traces)]) if span["trace_id"] == TRACE_ID]
    assert [span["name"] for span in spans] == ["/samsa.v1.BrokerService/ListOffsets"], (
        "the span did not continue the caller's trace"
    )
    assert spans[0]["parent_span_id"] == "00f067aa0ba902b7"
    assert spans[0]["service"] == "samsa-broker-1"
    for line in log.splitlines():
        json.loads(line)  # spans never break the JSON-lines log

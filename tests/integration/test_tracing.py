"""OpenTelemetry: with OTEL_TRACES_EXPORTER set, each RPC is a span continuing the caller's W3C
trace context; without it, services run with no tracing at all."""

from __future__ import annotations

import grpc
import pytest
from cluster_helpers import local_cluster

from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(180)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def test_an_rpc_span_continues_the_callers_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
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
    assert "/samsa.v1.BrokerService/ListOffsets" in log
    assert f"0x{TRACE_ID}" in log, "the span did not continue the caller's trace"

"""Traces end to end (DESIGN §9): one record sent inside an application span carries that span's
W3C context in its headers and on the produce request, and its journey reads as one trace tree:
the leader's produce span with its append, replicate, high watermark and fetch children, and the
consumer's poll span, child of and linked to the send. An admin call made through a broker is
forwarded to the controller inside the same trace (the broker's outgoing calls carry context).
`samsa trace` prints the tree from the span file. Method: two brokers and one controller with
OTEL_TRACES_EXPORTER=file, all processes appending to one shared span file (O_APPEND lines); the
application runs in a subprocess (record_trace_proc.py) with its own tracer provider on that file,
bootstrapped from a broker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cluster_helpers import local_cluster

from samsa.cli.main import main as samsa
from samsa.common.span_file import read_spans

pytestmark = pytest.mark.timeout(180)

APP = Path(__file__).with_name("record_trace_proc.py")


def test_a_record_trace_runs_from_the_send_through_the_broker_to_the_poll(
    tmp_path, monkeypatch, capsys
):
    traces = tmp_path / "traces.jsonl"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "file")
    monkeypatch.setenv("SAMSA_TRACES_FILE", str(traces))
    with local_cluster(tmp_path, controllers=1, brokers=2) as cluster:
        bootstrap = cluster.spec.brokers[0].endpoint
        app = subprocess.run(
            [sys.executable, str(APP), bootstrap, "orders", "2", str(traces)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert app.returncode == 0, app.stderr
        cluster.stop_all()  # the services export in batches: a clean stop flushes them
    send_trace, setup_trace = app.stdout.split()
    all_spans = list(read_spans([str(traces)]))
    spans = [span for span in all_spans if span["trace_id"] == send_trace]
    by_id = {span["span_id"]: span for span in spans}

    def parent_of(span: dict) -> dict:
        return by_id[span["parent_span_id"]]

    (send,) = [span for span in spans if span["name"] == "checkout"]
    assert send["service"] == "test-app"
    (poll,) = [span for span in spans if span["name"] == "poll orders"]
    assert poll["kind"] == "CONSUMER"
    assert poll["parent_span_id"] == send["span_id"]
    assert [link["span_id"] for link in poll["links"]] == [send["span_id"]]
    assert poll["attributes"]["messaging.system"] == "samsa"
    assert poll["attributes"]["messaging.destination.name"] == "orders"
    assert poll["attributes"]["messaging.destination.partition.id"] == "0"
    assert poll["attributes"]["messaging.kafka.offset"] == 0

    # The leader's side of the journey, all under its produce span.
    (produce,) = [span for span in spans if span["name"] == "produce orders"]
    assert produce["service"] == f"samsa-broker-{produce['attributes']['samsa.broker.id']}"
    assert produce["kind"] == "SERVER"
    assert parent_of(produce) is send
    leader_id = produce["attributes"]["samsa.broker.id"]
    follower_id = 3 - leader_id  # brokers 1 and 2
    steps = {span["name"]: span for span in spans if span["parent_span_id"] == produce["span_id"]}
    assert set(steps) >= {
        "append orders-0",
        f"replicate orders-0 to {follower_id}",
        "high watermark orders-0",
        "fetch orders-0",
    }, sorted(steps)
    append = steps["append orders-0"]
    assert append["attributes"]["messaging.kafka.offset"] == 0
    assert steps["high watermark orders-0"]["attributes"]["samsa.high_watermark"] >= 1
    # acks=all: the answer left once the follower held the record and the high watermark passed it
    replicate = steps[f"replicate orders-0 to {follower_id}"]
    assert append["end_ns"] <= replicate["end_ns"] <= produce["end_ns"]
    assert steps["high watermark orders-0"]["end_ns"] <= produce["end_ns"]
    assert steps["fetch orders-0"]["start_ns"] >= append["end_ns"]

    # Idle polls and heartbeats started no trace of their own in any process.
    quiet_names = ("Heartbeat", "FetchMetadata", "/Fetch", "FetchStream", "/Check")
    quiet = [span for span in all_spans if span["name"].endswith(quiet_names)]
    assert quiet == [], quiet[:3]

    # The create-topics call went client -> broker -> (forwarded) controller, one trace.
    setup = [span for span in all_spans if span["trace_id"] == setup_trace]
    forwarded = [span for span in setup if span["name"].endswith("/CreateTopics")]
    assert {(span["service"], span["kind"]) for span in forwarded} >= {
        ("test-app", "CLIENT"),
        ("samsa-broker-1", "SERVER"),
        ("samsa-broker-1", "CLIENT"),
        ("samsa-controller-1", "SERVER"),
    }, forwarded

    assert samsa(["trace", send_trace, "--file", str(traces)]) == 0
    tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith("test-app  checkout  ")
    assert any(line.startswith("  test-app  poll orders  ") for line in tree[1:])
    broker = produce["service"]
    assert any(line.startswith(f"  {broker}  produce orders  ") for line in tree[1:])
    assert any(line.startswith(f"    {broker}  append orders-0  ") for line in tree[1:])

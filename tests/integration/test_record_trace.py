"""Traces end to end (DESIGN §9): one record sent inside an application span carries that span's
W3C context in its headers, and the consumer's poll span joins the same trace, child of and linked
to it; `samsa trace` prints the tree from the span file. Method: a one-broker cluster with
OTEL_TRACES_EXPORTER=file, all processes appending to one shared span file (O_APPEND lines); the
application runs in a subprocess (record_trace_proc.py) with its own tracer provider on that file.
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


def test_a_record_trace_runs_from_the_send_to_the_poll(tmp_path, monkeypatch, capsys):
    traces = tmp_path / "traces.jsonl"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "file")
    monkeypatch.setenv("SAMSA_TRACES_FILE", str(traces))
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        app = subprocess.run(
            [sys.executable, str(APP), cluster.spec.bootstrap_servers, "orders", str(traces)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert app.returncode == 0, app.stderr
        cluster.stop_all()  # the services export in batches: a clean stop flushes them
    trace_id = app.stdout.strip()
    spans = [span for span in read_spans([str(traces)]) if span["trace_id"] == trace_id]
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
    assert samsa(["trace", trace_id, "--file", str(traces)]) == 0
    tree = capsys.readouterr().out.splitlines()
    assert tree[0].startswith("test-app  checkout  ")
    assert any(line.startswith("  test-app  poll orders  ") for line in tree[1:])

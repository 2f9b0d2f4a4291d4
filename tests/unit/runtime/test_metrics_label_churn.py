"""Goal: series labelled by what comes and goes (a topic, a consumer group) follow it on the
Prometheus endpoint: a deleted topic's counters and a vanished group's lag stop being exported,
and the 2,001st topic or group is exported with its own labels, not folded into OpenTelemetry's
unlabelled `otel_metric_overflow` series (the SDK keeps every label set it ever saw and stops at
2,000).

Method: a child Python process (metrics.start installs the process's one meter provider, which
this test process must not get) starts the real metrics endpoint on a free port, makes the
broker's and the coordinator's instruments as the services do (for_broker, for_coordinator),
counts produce and fetch for 2,100 topics and sets lags for 2,100 groups, then only keeps one
topic hosted and one group's lag, and scrapes /metrics over HTTP before and after; the parent
checks the text.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import json, sys, urllib.request
    from types import SimpleNamespace
    from samsa.services.runtime import metrics
    from samsa.services.broker.broker_metrics import for_broker
    from samsa.services.coordinator.coordinator_metrics import for_coordinator

    served = metrics.start("test", metrics.MetricsEndpoint("127.0.0.1", 0))

    def scrape():
        url = f"http://127.0.0.1:{served.port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.read().decode()

    broker = for_broker()
    coordinator = for_coordinator()
    topics = [f"topic-{i}" for i in range(2100)]
    for topic in topics:
        broker.produced(topic, 2, 100)
        broker.fetched({topic: 100}, {topic: 2}, follower=False)
    coordinator.lags = tuple((f"group-{i}", "t", 0, i + 1) for i in range(2100))
    before = scrape()
    hosted = SimpleNamespace(
        topic="topic-2099", is_leader=True, isr=(1,), replica_count=1,
        min_insync_replicas=1, producer_count=0,
    )
    broker.refresh([hosted])
    broker.produced("topic-2099", 1, 10)
    coordinator.lags = (("group-new", "t", 0, 42),)
    after = scrape()
    served.shutdown()
    json.dump({"before": before, "after": after}, sys.stdout)
    """
)


def lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def test_series_follow_topics_and_groups_that_come_and_go() -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 0, child.stderr[-3000:]
    scraped = json.loads(child.stdout)
    before, after = scraped["before"], scraped["after"]
    assert "otel_metric_overflow" not in before + after

    records_in = lines(before, "samsa_broker_records_in_total")
    assert len(records_in) == 2100  # every topic with its own series
    assert any('topic="topic-2099"' in line and line.endswith(" 2.0") for line in records_in)
    assert len(lines(before, "samsa_coordinator_group_lag")) == 2100

    # Only topic-2099 is hosted now: the others' series ended, its own kept counting.
    (kept,) = lines(after, "samsa_broker_records_in_total")
    assert 'topic="topic-2099"' in kept and kept.endswith(" 3.0")
    io = lines(after, "samsa_broker_io_bytes_total")
    assert len(io) == 2 and all('topic="topic-2099"' in line for line in io)
    assert len(lines(after, "samsa_broker_records_out_total")) == 1
    (lag,) = lines(after, "samsa_coordinator_group_lag")
    assert 'group="group-new"' in lag and 'partition="0"' in lag and lag.endswith(" 42.0")

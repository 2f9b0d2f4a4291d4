"""Goal: two scrapes at once (a pair of Prometheus servers, or Prometheus and a person with curl)
each get every series once. OpenTelemetry's Prometheus exporter hands each collection to the
scrape through a shared queue: when a second scrape's collection lands there before the first
scrape has taken its own, the first takes both (every series twice in its answer, which
Prometheus rejects as duplicate samples) and the second finds the queue empty (no series at all).

Method: a child process (metrics.start installs the process's one meter provider) serves the
real endpoint; the exporter's queue append is wrapped so that each scrape waits, just after
queueing its collection, for the other scrape's (at most 2 s), which forces the interleaving
above whenever two collections can run at once; two threads scrape together and each answer's
count of one gauge's lines is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import json, sys, threading, urllib.request
    from opentelemetry.exporter import prometheus
    from opentelemetry.metrics import Observation
    from samsa.services.runtime import metrics

    queued = prometheus._CustomCollector.add_metrics_data
    together = threading.Barrier(2, timeout=2)

    def add_metrics_data(self, data):
        queued(self, data)
        try:
            together.wait()  # until the other scrape queued its collection too, if it can
        except threading.BrokenBarrierError:
            pass

    prometheus._CustomCollector.add_metrics_data = add_metrics_data
    served = metrics.start("test", metrics.MetricsEndpoint("127.0.0.1", 0))
    metrics.meter().create_observable_gauge("samsa.test.gauge", [lambda o: [Observation(1)]])
    counts = []

    def scrape():
        url = f"http://127.0.0.1:{served.port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as answer:
            text = answer.read().decode()
        counts.append(sum(1 for l in text.splitlines() if l.startswith("samsa_test_gauge{")))

    threads = [threading.Thread(target=scrape) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    served.shutdown()
    json.dump(counts, sys.stdout)
    """
)


def test_concurrent_scrapes_each_get_every_series_once() -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert json.loads(child.stdout) == [1, 1]

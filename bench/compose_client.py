"""The compose bench's client (bench/compose_bench.py): one process per command, run in a
container on the compose network, on the host through the published ports, and against the
loopback cluster — the same code in all three places, so that only where it runs differs. Each
command prints one JSON line on stdout.

    python -m bench.compose_client BOOTSTRAP wait-cluster        -> {"healthy_at": wall clock}
    python -m bench.compose_client BOOTSTRAP create TOPIC...     -> {"created": [TOPIC...]}
    python -m bench.compose_client BOOTSTRAP produce TOPIC COUNT -> client_bench.samsa_produce
    python -m bench.compose_client BOOTSTRAP consume TOPIC COUNT -> client_bench.samsa_consume
    python -m bench.compose_client BOOTSTRAP scrape HOST:PORT... -> {"answered": [...], "series": N}

Records are RECORD_BYTES bytes, produced with acks=all to topics of PARTITIONS partitions,
REPLICAS replicas and min.insync.replicas=2. Only the standard library and samsa.client are
imported, and bench.client_bench: the image has them, with bench/ mounted into the container.
"""

from __future__ import annotations

import json
import sys
import time

RECORD_BYTES = 100
PARTITIONS = 3
REPLICAS = 3
BROKERS, COORDINATORS = 3, 2
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
CLUSTER_TIMEOUT_S = 120.0


def wait_cluster(bootstrap: str) -> dict[str, float]:
    """Until an active controller, BROKERS unfenced brokers and COORDINATORS live coordinators;
    when (wall clock, shared with the host) that was first seen."""
    from samsa.client import Admin

    deadline = time.monotonic() + CLUSTER_TIMEOUT_S
    seen = "nothing"
    while time.monotonic() < deadline:
        try:
            with Admin({"bootstrap.servers": bootstrap}) as admin:
                cluster = admin.describe_cluster()
        except Exception as error:  # brokers still starting: retried until the deadline
            seen = repr(error)
        else:
            active = any(c.active for c in cluster.controllers)
            unfenced = sum(not b.fenced for b in cluster.brokers)
            live = sum(not c.fenced for c in cluster.coordinators)
            seen = f"active={active} unfenced={unfenced} coordinators={live}"
            if active and unfenced >= BROKERS and live >= COORDINATORS:
                return {"healthy_at": time.time()}
        time.sleep(0.2)
    raise SystemExit(f"cluster not healthy after {CLUSTER_TIMEOUT_S:.0f} s: {seen}")


def create_topics(bootstrap: str, topics: list[str]) -> dict[str, object]:
    """The topics, each with a leader and a full ISR on every partition."""
    from samsa.client import Admin, NewTopic

    wait_cluster(bootstrap)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(t, PARTITIONS, REPLICAS, TOPIC_CONFIGS) for t in topics])
        deadline = time.monotonic() + CLUSTER_TIMEOUT_S
        while time.monotonic() < deadline:
            described = admin.describe_topics(topics)
            partitions = [p for t in topics for p in described[t].partitions]
            if all(p.leader >= 0 and len(p.isr) == REPLICAS for p in partitions):
                return {"created": topics}
            time.sleep(0.1)
    raise SystemExit(f"{topics}: no full ISR after {CLUSTER_TIMEOUT_S:.0f} s")


def scrape(targets: list[str]) -> dict[str, object]:
    """How many of `targets` (HOST:PORT) answer /metrics, and the samsa_* series they hold."""
    import urllib.request

    answered, series = [], 0
    for target in targets:
        try:
            with urllib.request.urlopen(f"http://{target}/metrics", timeout=10) as answer:
                text = answer.read().decode()
        except OSError:
            continue
        answered.append(target)
        series += sum(line.startswith("samsa_") for line in text.splitlines())
    return {"answered": answered, "series": series}


def main(argv: list[str]) -> None:
    """`python -m bench.compose_client BOOTSTRAP COMMAND ARGS`: one JSON line on stdout."""
    from bench import client_bench

    bootstrap, command, *args = argv
    if command == "wait-cluster":
        result: dict = wait_cluster(bootstrap)
    elif command == "create":
        result = create_topics(bootstrap, args)
    elif command == "produce":
        topic, count = args[0], int(args[1])
        result = client_bench.samsa_produce(bootstrap, topic, count, RECORD_BYTES, "none", "all")
    elif command == "consume":
        topic, count = args[0], int(args[1])
        result = client_bench.samsa_consume(bootstrap, topic, count, RECORD_BYTES, PARTITIONS)
    elif command == "scrape":
        result = scrape(args)
    else:
        raise SystemExit(f"unknown client command {command!r}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

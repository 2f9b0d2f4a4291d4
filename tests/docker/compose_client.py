"""The client side of test_compose.py, run both in a container on the compose network and on
the host: one JSON line on stdout per command, so the test can compare what was acknowledged
with what is read back.

    python compose_client.py BOOTSTRAP wait-healthy BROKERS COORDINATORS -> {"active": N, ...}
    python compose_client.py BOOTSTRAP create TOPIC PARTITIONS
    python compose_client.py BOOTSTRAP produce TOPIC PREFIX COUNT   -> {"acked": [values]}
    python compose_client.py BOOTSTRAP consume TOPIC                -> {"values": [values]}

With COMPOSE_CLIENT_PROPERTIES naming a properties file (key=value lines, such as the
client.properties deploy/generate-certificates.sh writes), every client also takes its keys: the
TLS settings, for the TLS overlay (test_compose_tls.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from samsa.client import Admin, Consumer, NewTopic, Producer

DEADLINE_S = 60.0


def properties() -> dict[str, str]:
    """The keys of the file COMPOSE_CLIENT_PROPERTIES names; none without it."""
    path = os.environ.get("COMPOSE_CLIENT_PROPERTIES")
    if not path:
        return {}
    lines = Path(path).read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if "=" in line and not line.startswith("#")]
    return {key.strip(): value.strip() for key, value in pairs}


def config(bootstrap: str, **keys: str) -> dict[str, str]:
    """A client's configuration: `bootstrap`, the properties file's keys, `keys`."""
    return {"bootstrap.servers": bootstrap, **properties(), **keys}


def wait_healthy(bootstrap: str, brokers: int, coordinators: int) -> dict[str, object]:
    """Until the cluster has an active controller, `brokers` unfenced brokers and
    `coordinators` live coordinators (what `samsa up` waits for)."""
    deadline = time.monotonic() + DEADLINE_S
    seen = "nothing"
    while time.monotonic() < deadline:
        try:
            admin = Admin(config(bootstrap))
            try:
                cluster = admin.describe_cluster()
            finally:
                admin.close()
        except Exception as error:  # retried until the deadline
            seen = repr(error)
        else:
            active = [c.node_id for c in cluster.controllers if c.active]
            unfenced = [b.broker_id for b in cluster.brokers if not b.fenced]
            live = [c.coordinator_id for c in cluster.coordinators if not c.fenced]
            seen = f"active={active} unfenced={unfenced} coordinators={live}"
            if active and len(unfenced) >= brokers and len(live) >= coordinators:
                return {"active": active[0], "brokers": unfenced}
        time.sleep(0.5)
    raise SystemExit(f"not healthy after {DEADLINE_S:.0f} s: {seen}")


def create(bootstrap: str, topic: str, partitions: int) -> dict[str, object]:
    admin = Admin(config(bootstrap))
    try:
        admin.create_topics(
            [NewTopic(topic, partitions, 3, {"min.insync.replicas": "2"})],
        )
    finally:
        admin.close()
    return {"created": topic}


def produce(bootstrap: str, topic: str, prefix: str, count: int) -> dict[str, object]:
    """Send `count` records with acks=all; report the values whose send was acknowledged."""
    producer = Producer(config(bootstrap, acks="all"))
    values = [f"{prefix}-{i}" for i in range(count)]
    futures = [(value, producer.send(topic, value.encode())) for value in values]
    acked, failed = [], []
    for value, future in futures:
        try:
            future.result(timeout=60)
        except Exception as error:  # an unacknowledged send is allowed to fail
            failed.append(f"{value}: {error!r}")
        else:
            acked.append(value)
    producer.close()
    return {"acked": acked, "failed": failed[:5]}


def consume(bootstrap: str, topic: str) -> dict[str, object]:
    """Every value of `topic` from the beginning up to its end offsets at the start."""
    consumer = Consumer(config(bootstrap))
    try:
        admin = Admin(config(bootstrap))
        try:
            partitions = admin.describe_topics([topic])[topic].partitions
        finally:
            admin.close()
        assignment = [(topic, p.partition) for p in partitions]
        consumer.assign(assignment)
        consumer.seek_to_beginning(assignment)
        ends = consumer.end_offsets(assignment)
        values: list[str] = []
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                raise SystemExit(f"consumed {len(values)} records; end offsets {ends}")
            values += [record.value.decode() for record in consumer.poll(timeout=1.0)]
    finally:
        consumer.close()
    return {"values": values}


def main(argv: list[str]) -> int:
    bootstrap, command, *args = argv
    if command == "wait-healthy":
        result = wait_healthy(bootstrap, int(args[0]), int(args[1]))
    elif command == "create":
        result = create(bootstrap, args[0], int(args[1]))
    elif command == "produce":
        result = produce(bootstrap, args[0], args[1], int(args[2]))
    elif command == "consume":
        result = consume(bootstrap, args[0])
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Goal: against a real broker, a record whose CreateTime lies outside the topic's bounds around
the leader's clock (KIP-937: message.timestamp.before.max.ms, and after.max.ms, one hour by
default as in Kafka 4.0) fails its future with INVALID_TIMESTAMP and a message naming the
setting, stores nothing, and leaves the producer writing; raising the setting takes effect on
the broker without a restart.

Method: one controller, one broker; the SDK's idempotent Producer sends one record per batch
(each awaited); the topic is read back with the SDK's Consumer. Processes are stopped by PID on
the way out, also on failure.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_helpers import local_cluster, read_to_end

from samsa.client import Admin, NewTopic, Producer
from samsa.common.errors import ErrorCode

pytestmark = pytest.mark.timeout(240)
TOPIC = "bounded"
HOUR_MS = 3_600_000
WAIT_S = 60


def test_records_outside_the_bounds_are_refused_and_the_producer_goes_on(tmp_path: Path):
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        servers = cluster.spec.bootstrap_servers
        with Admin({"bootstrap.servers": servers}) as admin:
            admin.create_topics(
                [NewTopic(TOPIC, 1, 1, {"message.timestamp.before.max.ms": str(HOUR_MS)})]
            )
            described = admin.describe_configs(TOPIC)
            assert described["message.timestamp.after.max.ms"].value == str(HOUR_MS)
            with Producer({"bootstrap.servers": servers}) as producer:

                def send(value: bytes, timestamp: int) -> BaseException | None:
                    future = producer.send(TOPIC, value, partition=0, timestamp=timestamp)
                    return future.exception(WAIT_S)

                now_ms = int(time.time() * 1000)
                assert send(b"now", now_ms) is None
                ahead = send(b"ahead", now_ms + 2 * HOUR_MS)
                behind = send(b"behind", now_ms - 2 * HOUR_MS)
                assert send(b"after", int(time.time() * 1000)) is None
                for error, key in (
                    (ahead, "message.timestamp.after.max.ms"),
                    (behind, "message.timestamp.before.max.ms"),
                ):
                    assert error is not None and error.code == ErrorCode.INVALID_TIMESTAMP
                    assert key in str(error)

                admin.alter_configs(TOPIC, {"message.timestamp.after.max.ms": str(100 * HOUR_MS)})
                deadline = time.monotonic() + WAIT_S
                while send(b"ahead, allowed", now_ms + 2 * HOUR_MS) is not None:
                    assert time.monotonic() < deadline, "the raised bound never reached the broker"
                    time.sleep(0.2)
        records = read_to_end(servers, [(TOPIC, 0)], "read_uncommitted")
        assert [value for _, _, value in records] == [b"now", b"after", b"ahead, allowed"]

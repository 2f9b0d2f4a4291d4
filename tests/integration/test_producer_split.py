"""Goal: against a real broker whose topic takes smaller batches than the producer builds
(max.message.bytes below batch.size), the SDK's producer splits the refused batch and every
record lands once, in order, each future with its own offset; a record too large on its own
fails with its size, the records around it written.

Method: one controller, one broker; a topic with max.message.bytes 2000; the sync Producer
(idempotent, the default) lingers so that one flush sends one large batch. The records are read
back with the SDK's Consumer. Processes are stopped by PID on the way out, also on failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_helpers import local_cluster, read_to_end

from samsa.client import Admin, NewTopic, Producer
from samsa.common.errors import ErrorCode

pytestmark = pytest.mark.timeout(240)
TOPIC = "split"
WAIT_S = 60


def test_a_batch_too_large_for_the_topic_is_split_and_lands_once_in_order(tmp_path: Path):
    with local_cluster(tmp_path, controllers=1, brokers=1) as cluster:
        servers = cluster.spec.bootstrap_servers
        with Admin({"bootstrap.servers": servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1, {"max.message.bytes": "2000"})])
        values = [b"%03d" % n + b"v" * 197 for n in range(60)]  # ~13 KiB in one batch
        huge = b"h" * 5_000
        config = {"bootstrap.servers": servers, "linger.ms": 60_000}
        with Producer(config) as producer:
            futures = [producer.send(TOPIC, value, partition=0) for value in values[:30]]
            refused = producer.send(TOPIC, huge, partition=0)
            futures += [producer.send(TOPIC, value, partition=0) for value in values[30:]]
            producer.flush(WAIT_S)
            offsets = [future.result(0).offset for future in futures]
            error = refused.exception(0)
            assert producer.batch_splits >= 3 and producer.failed_records == 1
        assert error is not None and error.code == ErrorCode.MESSAGE_TOO_LARGE
        assert "bytes in a batch of its own" in str(error)
        assert offsets == sorted(offsets) and len(set(offsets)) == len(values)
        records = read_to_end(servers, [(TOPIC, 0)], "read_uncommitted")
        assert [value for _, _, value in records] == values
        assert [offset for _, offset, _ in records] == offsets

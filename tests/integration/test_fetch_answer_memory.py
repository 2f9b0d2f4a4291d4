"""Goal: a stranger's fetches that never read their answers cannot grow a broker's memory past
its answer budget (fetch.answers.bytes.max, services/broker/requests/answer_budget.py); the
broker keeps answering meanwhile, and an SDK consumer reads every record once they are gone.

Method: one controller and one broker with the budget at its floor (128 MiB of memory: 64 MiB
of answers); 36 MiB of records in one partition. A client opens STREAMS FetchStreams on four
connections, each asking for 8 MiB from offset 0, and never reads an answer (gRPC's flow
control then holds each written answer in the broker). The broker's VmRSS is sampled over a
few seconds: its growth must stay within the budget plus slack. Unbounded, the same attack
grew it by 367 MiB (24 x 8 MiB answers, each costing twice its bytes); bounded, by 124 MiB.
Before the attack, 32 unary fetches of 8 MiB in turn all come whole: a unary answer's bytes
are released when its call ends (a leak would starve the ninth). A unary fetch during the
attack gets an answer within its max_wait (empty: the budget is taken). Then the stranger goes
away, and an SDK consumer reads all the records.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import grpc
import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until

from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
BUDGET_BYTES = 128 * MIB  # the key's floor: one maximal answer, twice
SLACK_BYTES = 64 * MIB  # transient reads, gRPC's buffers, allocator fragmentation
STREAMS = 24
ANSWER_BYTES = 8 * MIB
RECORDS = 40
VALUE_BYTES = 900_000
TOPIC = "held-answers"
# Each stream its own connection among four; no BDP probing, so the client's window stays small.
OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.http2.bdp_probe", 0),
    ("grpc.max_receive_message_length", 100 * MIB),
]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def big_fetch(max_wait_ms: int = 0) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(max_bytes=ANSWER_BYTES, max_wait_ms=max_wait_ms)
    request.topics.add(name=TOPIC).partitions.add(
        partition=0, fetch_offset=0, partition_max_bytes=ANSWER_BYTES
    )
    return request


async def hold_answers(endpoint: str, pid: int) -> tuple[int, broker_pb2.FetchResponse]:
    """Open the unread streams; the broker's peak RSS over a few seconds, and a unary fetch's
    answer meanwhile."""
    channels = [grpc.aio.insecure_channel(endpoint, options=OPTIONS) for _ in range(4)]
    try:
        calls = []
        for number in range(STREAMS):
            call = broker_pb2_grpc.BrokerServiceStub(channels[number % 4]).FetchStream()
            await call.write(broker_pb2.FetchStreamRequest(request=big_fetch()))
            calls.append(call)
        peak = 0
        for _ in range(40):  # the answers are read and written as fast as the broker can
            await asyncio.sleep(0.1)
            peak = max(peak, rss_bytes(pid))
        stub = broker_pb2_grpc.BrokerServiceStub(channels[0])
        meanwhile = await stub.Fetch(big_fetch(max_wait_ms=200), timeout=30)
        for call in calls:
            call.cancel()
        return peak, meanwhile
    finally:
        for channel in channels:
            await channel.close()


def test_unread_answers_stay_within_the_budget_and_a_consumer_reads_everything(
    tmp_path: Path,
) -> None:
    settings = FAST_SETTINGS | {"fetch.answers.bytes.max": str(BUDGET_BYTES)}
    with local_cluster(tmp_path, 1, 1, settings) as cluster:
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
        with Admin(config) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        values = [os.urandom(VALUE_BYTES) for _ in range(RECORDS)]
        with Producer({**config, "linger.ms": "0"}) as producer:
            for value in values:
                producer.send(TOPIC, value, partition=0).result(timeout=30)
        pid = cluster.processes["broker-1"].pid
        # Unary answers are released when their call ends: more of them, one after another,
        # than the budget holds at once all come whole (a leak would starve the ninth).
        with grpc.insecure_channel(cluster.spec.brokers[0].endpoint, options=OPTIONS) as channel:
            stub = broker_pb2_grpc.BrokerServiceStub(channel)
            for number in range(2 * BUDGET_BYTES // ANSWER_BYTES):
                answer = stub.Fetch(big_fetch(), timeout=30)
                held = len(answer.topics[0].partitions[0].records)
                assert held > ANSWER_BYTES // 2, f"unary fetch {number} got {held} bytes"
        before = rss_bytes(pid)
        peak, meanwhile = asyncio.run(hold_answers(cluster.spec.brokers[0].endpoint, pid))
        growth = peak - before
        assert growth <= BUDGET_BYTES + SLACK_BYTES, (
            f"unread answers grew the broker by {growth // MIB} MiB, past its budget of "
            f"{BUDGET_BYTES // MIB} MiB + {SLACK_BYTES // MIB} MiB"
        )
        assert meanwhile.topics[0].partitions[0].error_code == 0, "the broker still answers"

        with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([(TOPIC, 0)])
            seen: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(seen) < RECORDS and time.monotonic() < deadline:
                seen += [record.value for record in consumer.poll(timeout=0.5)]
        assert seen == values, f"the consumer read {len(seen)} of {RECORDS} records"
        wait_until("the broker to release every answer", lambda: rss_bytes(pid) < peak)

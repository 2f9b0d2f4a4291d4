"""Goal: a stranger who fills a broker's answer budget with fetches it never reads holds it only
until the write deadline (fetch.answer.write.timeout.ms, services/broker/requests/
answer_write_deadline.py): then an SDK consumer of that broker reads its records again, without
the stranger closing anything, and the stranger's calls have ended with a status.

Method: one controller and one broker with the budget at its floor (128 MiB of memory: 64 MiB of
answers) and the deadline lowered to DEADLINE_MS; 36 MiB of records in one partition. A raw
client opens STREAMS FetchStreams and UNARY unary Fetches (sent on Fetch's path as a stream, so
that it never reads the answer), each asking for 8 MiB from offset 0, on two connections that
read nothing: together more than the budget. Unary fetches follow until one gets an empty answer
(the budget is taken). Then an SDK consumer must read every record. Each of the stranger's calls,
read at last, must have ended with CANCELLED, unless its answer held nothing (it waited in line,
answered empty and was written at once); those that ended must account for the budget, and the
broker's RSS must fall by half the budget from its level while the budget was taken (gRPC freed
the answers, not only the budget's count of them). The broker's log names each RPC it ended
(fewer than limits.rpc_failure_log_lines_max here). Without the deadline the consumer reads
nothing until the stranger goes (checked by making `arm` arm nothing: the consumer read 0 of 40
records in its 60 s).
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
from samsa.common import limits
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
ANSWER_BYTES = 8 * MIB
BUDGET_BYTES = 128 * MIB  # the key's floor: 64 MiB of answers, eight of 8 MiB
DEADLINE_MS = 4000
BUDGET_WAIT_S = 30.0  # how long the stranger's answers may take to fill the budget
STREAMS = 8
UNARY = 2
RECORDS = 40
VALUE_BYTES = 900_000
TOPIC = "unread-answers"
FETCH = "/samsa.v1.BrokerService/Fetch"
ENDED_LINE = "its answer ("  # answer_write_deadline.py's line
# Each channel its own connection; no BDP probing, so the client's flow-control window stays
# small (as in test_fetch_answer_memory.py).
OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.http2.bdp_probe", 0),
    ("grpc.max_receive_message_length", 100 * MIB),
]


def big_fetch(max_wait_ms: int = 0) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(max_bytes=ANSWER_BYTES, max_wait_ms=max_wait_ms)
    request.topics.add(name=TOPIC).partitions.add(
        partition=0, fetch_offset=0, partition_max_bytes=ANSWER_BYTES
    )
    return request


async def stranger(
    endpoint: str, pid: int, config: dict[str, str], values: list[bytes]
) -> list[str]:
    """Fill the budget with unread answers, wait until it is taken, check that an SDK consumer
    reads every record and that the broker's memory comes back; how each of the stranger's calls
    ended (`ending`)."""
    channels = [grpc.aio.insecure_channel(endpoint, options=OPTIONS) for _ in range(2)]
    try:
        calls = []
        for number in range(STREAMS + UNARY):
            channel = channels[number % 2]
            if number < STREAMS:
                call = broker_pb2_grpc.BrokerServiceStub(channel).FetchStream()
                await call.write(broker_pb2.FetchStreamRequest(request=big_fetch()))
            else:
                call = channel.stream_stream(
                    FETCH,
                    broker_pb2.FetchRequest.SerializeToString,
                    broker_pb2.FetchResponse.FromString,
                )()
                await call.write(big_fetch())
                await call.done_writing()
            calls.append(call)
        await budget_taken(endpoint)
        taken_rss_bytes = rss_bytes(pid)

        seen = await asyncio.to_thread(consume, config, len(values))
        assert seen == values, f"the consumer read {len(seen)} of {RECORDS} records"
        # gRPC dropped the answers, not only the budget's count of them (measured: 196 MiB
        # while the budget was taken, 68 MiB after). Before the calls are read: reading would
        # let a write that was not ended complete.
        await asyncio.to_thread(
            wait_until,
            "the broker to free the dropped answers",
            lambda: rss_bytes(pid) < taken_rss_bytes - BUDGET_BYTES // 2,
        )
        return [await ending(call) for call in calls]
    finally:
        for channel in channels:
            await channel.close()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


async def ending(call: grpc.aio.Call) -> str:
    """How a stranger's call ended, read at last: CANCELLED (its answer was dropped), or an
    empty answer (one that could hold nothing was written at once; the stream stays open)."""
    try:
        answer = await asyncio.wait_for(call.read(), 30)
    except grpc.aio.AioRpcError as error:
        return error.code().name
    call.cancel()
    if isinstance(answer, broker_pb2.FetchStreamResponse):
        answer = answer.response
    records = sum(len(partition.records) for partition in answer.topics[0].partitions)
    return "EMPTY" if records == 0 else f"READ {records} bytes"


async def budget_taken(endpoint: str) -> None:
    """Wait until a unary fetch gets an empty answer: the broker has read the stranger's.

    An empty answer proves the budget is taken at that moment, whenever it comes, so the wait is
    bounded by BUDGET_WAIT_S, not by the deadline: on a loaded machine the broker may take longer
    than DEADLINE_MS to read the stranger's requests and build their answers (the deadline runs
    from each answer's write). A budget taken and released between two polls is never seen, and
    the wait fails: each poll is ~0.1 s, far inside DEADLINE_MS."""
    async with grpc.aio.insecure_channel(endpoint, options=OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        held = -1
        give_up = time.monotonic() + BUDGET_WAIT_S
        while time.monotonic() < give_up:
            answer = await stub.Fetch(big_fetch(max_wait_ms=50), timeout=30)
            held = len(answer.topics[0].partitions[0].records)
            if held == 0:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the budget was not taken: a fetch still read {held} bytes")


def consume(config: dict[str, str], count: int) -> list[bytes]:
    with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([(TOPIC, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(seen) < count and time.monotonic() < deadline:
            seen += [record.value for record in consumer.poll(timeout=0.5)]
        return seen


def test_a_stranger_who_never_reads_holds_the_budget_only_until_the_write_deadline(
    tmp_path: Path,
) -> None:
    settings = FAST_SETTINGS | {
        "fetch.answers.bytes.max": str(BUDGET_BYTES),
        "fetch.answer.write.timeout.ms": str(DEADLINE_MS),
    }
    with local_cluster(tmp_path, 1, 1, settings) as cluster:
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
        with Admin(config) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        values = [os.urandom(VALUE_BYTES) for _ in range(RECORDS)]
        with Producer({**config, "linger.ms": "0"}) as producer:
            for value in values:
                producer.send(TOPIC, value, partition=0).result(timeout=30)
        assert STREAMS * ANSWER_BYTES >= BUDGET_BYTES // 2, "the stranger fills the budget"

        pid = cluster.processes["broker-1"].pid
        endpoint = cluster.spec.brokers[0].endpoint
        endings = asyncio.run(stranger(endpoint, pid, config, values))
        assert set(endings) <= {"CANCELLED", "EMPTY"}, endings
        cancelled = endings.count("CANCELLED")
        assert cancelled * ANSWER_BYTES >= BUDGET_BYTES // 2 - ANSWER_BYTES, endings
        log_text = (cluster.data_dir / "logs" / "broker-1.log").read_text(errors="replace")
        ended = [line for line in log_text.splitlines() if ENDED_LINE in line]
        assert len(ended) == min(cancelled, limits.rpc_failure_log_lines_max), ended

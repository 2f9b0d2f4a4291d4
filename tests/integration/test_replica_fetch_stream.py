"""Goal: followers replicate over ReplicaFetchStream (services/broker/replica/replica_stream.py)
with the guarantees of the unary Fetch they replace: only a member of the cluster can open one, as
the broker every one of its requests names; a malformed request ends it with a status saying what to
fix; a stream broken mid-way (a cancelled call, a killed follower) loses nothing — the fetch session
survives it or is opened again, the follower catches up and the high watermark moves; and a follower
whose leader does not serve the stream falls back to unary Fetch.

Method: real processes over loopback gRPC (tests/integration/cluster_helpers.py), every process
stopped by PID. The refusals run against a cluster with RF=2 whose follower is paused (SIGSTOP)
after acks=1 writes, so the leader's log runs ahead of its high watermark: a forged stream that
got through would move it, and the test checks it did not. The session test speaks the protocol
itself, as the paused follower. The fallback test runs a follower's `leader_link` against an
in-process gRPC server that serves Fetch only (a broker from before the stream).
"""

from __future__ import annotations

import asyncio
import queue
import secrets
import signal
import time
from pathlib import Path

import grpc
import pytest
from cluster_helpers import admin_write, local_cluster, wait_until

from samsa.client import Admin, Consumer, NewTopic, Producer
from samsa.services.broker.replica.replica_fetcher import ANSWER_WAIT_S, FETCH_METHOD, leader_link
from samsa.services.broker.replica.replica_stream import STREAM_METHOD
from samsa.services.runtime import membership
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.secret import load_secret
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2

pytestmark = pytest.mark.timeout(300)

TOPIC = "streamed"
# Long sessions and lag windows: the paused follower must stay registered and in the ISR.
PAUSED_SETTINGS = {
    "broker.session.timeout.ms": "30000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "30000",
}
FAST_SETTINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "2000",
}
WRONG_SECRET = "w" * 43


def proof(data_dir: Path, method: str, member_id: int, secret: str | None = None):
    key = membership.derive_key(secret or load_secret(data_dir / "cluster.secret"))
    signed = membership.sign(key, method, member_id, int(time.time() * 1000), secrets.token_hex(8))
    return ((membership.METADATA_KEY, signed),)


class Stream:
    """One ReplicaFetchStream from a test: `ask` sends a request and returns its answer."""

    def __init__(self, endpoint: str, metadata) -> None:  # type: ignore[no-untyped-def]
        self.channel = grpc.insecure_channel(endpoint)
        self.requests: queue.Queue[broker_pb2.ReplicaFetchStreamRequest | None] = queue.Queue()

        def requests():  # type: ignore[no-untyped-def]
            while (item := self.requests.get()) is not None:
                yield item

        stub = broker_pb2_grpc.BrokerServiceStub(self.channel)
        self.answers = stub.ReplicaFetchStream(requests(), metadata=metadata, timeout=60)

    def ask(self, request: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        self.requests.put(broker_pb2.ReplicaFetchStreamRequest(request=request))
        return next(self.answers).response

    def close(self) -> None:
        self.answers.cancel()
        self.requests.put(None)
        self.channel.close()


def fetch(replica_id: int | None, offset: int, **fields) -> broker_pb2.FetchRequest:  # type: ignore[no-untyped-def]
    request = broker_pb2.FetchRequest(
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name=TOPIC,
                partitions=[
                    broker_pb2.FetchRequest.PartitionData(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        **{"max_wait_ms": 0, **fields},
    )
    if replica_id is not None:
        request.replica_id = replica_id
    return request


def endpoint_of(cluster, broker_id: int) -> str:  # type: ignore[no-untyped-def]
    return next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)


def partition(cluster):  # type: ignore[no-untyped-def]
    answer = admin_write(
        cluster.spec, "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC])
    )
    return answer.topics[0].partitions[0]


def high_watermark(cluster, leader: int) -> int:  # type: ignore[no-untyped-def]
    """The leader's high watermark, asked as a consumer."""
    stub = broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(endpoint_of(cluster, leader)))
    result = stub.Fetch(fetch(None, 0), timeout=5).topics[0].partitions[0]
    assert result.error_code == 0, result.error_message
    return result.high_watermark


def assert_ends(stream: Stream, request, code: grpc.StatusCode, *phrases: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as ended:
        stream.ask(request)
    stream.close()
    assert ended.value.code() == code, ended.value.details()
    for phrase in phrases:
        assert phrase in ended.value.details(), ended.value.details()


def start_with_full_isr(cluster, replicas: int):  # type: ignore[no-untyped-def]
    with Admin({"bootstrap.servers": cluster.spec.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, replicas, {"min.insync.replicas": "2"})])
    return wait_until(
        "a leader and a full ISR",
        lambda: (s := partition(cluster)).leader >= 0 and len(s.isr) == replicas and s,
        60,
    )


def test_only_the_member_it_proves_may_use_a_stream_and_a_broken_one_keeps_the_session(
    tmp_path: Path,
) -> None:
    with local_cluster(tmp_path, 1, 2, PAUSED_SETTINGS) as cluster:
        state = start_with_full_isr(cluster, 2)
        leader = state.leader
        follower = next(r for r in state.replicas if r != leader)
        endpoint = endpoint_of(cluster, leader)
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
        with Producer({**config, "acks": "all"}) as producer:
            for i in range(5):
                producer.send(TOPIC, f"acked-{i}".encode(), partition=0).result(timeout=30)
        acked_end = high_watermark(cluster, leader)
        assert acked_end == 5

        cluster.kill(f"broker-{follower}", signal.SIGSTOP)
        try:
            with Producer({**config, "acks": "1"}) as producer:
                sent = [producer.send(TOPIC, b"leader-only", partition=0) for _ in range(5)]
                log_end = max(future.result(30).offset for future in sent) + 1
            assert high_watermark(cluster, leader) == acked_end

            # Strangers and mistakes: each ends its stream before anything is read.
            forged = fetch(follower, log_end)
            assert_ends(
                Stream(endpoint, ()), forged, grpc.StatusCode.PERMISSION_DENIED, "must carry"
            )
            wrong = proof(tmp_path, STREAM_METHOD, follower, WRONG_SECRET)
            assert_ends(Stream(endpoint, wrong), forged, grpc.StatusCode.PERMISSION_DENIED)
            for_fetch = proof(tmp_path, FETCH_METHOD, follower)  # signed for another method
            assert_ends(Stream(endpoint, for_fetch), forged, grpc.StatusCode.PERMISSION_DENIED)
            member = proof(tmp_path, STREAM_METHOD, follower)
            assert_ends(
                Stream(endpoint, member),
                fetch(None, 0),
                grpc.StatusCode.INVALID_ARGUMENT,
                "set replica_id",
            )
            assert_ends(
                Stream(endpoint, proof(tmp_path, STREAM_METHOD, follower)),
                fetch(follower, 0, max_wait_ms=-1),
                grpc.StatusCode.INVALID_ARGUMENT,
                "must not be negative",
            )
            assert high_watermark(cluster, leader) == acked_end

            # A member's stream, then a request in another broker's name: refused.
            stream = Stream(endpoint, proof(tmp_path, STREAM_METHOD, follower))
            answer = stream.ask(fetch(follower, acked_end))
            assert answer.topics[0].partitions[0].error_code == 0
            assert_ends(
                stream, fetch(leader, 0), grpc.StatusCode.PERMISSION_DENIED, "its own stream"
            )

            # A session opened on one stream survives that stream breaking mid-long-poll: the
            # unanswered fetch leaves the session at the epoch it expected.
            stream = Stream(endpoint, proof(tmp_path, STREAM_METHOD, follower))
            opened = stream.ask(fetch(follower, acked_end, session_id=0, session_epoch=0))
            assert opened.error_code == 0 and opened.session_id > 0
            session_id = opened.session_id
            stream.requests.put(
                broker_pb2.ReplicaFetchStreamRequest(
                    request=broker_pb2.FetchRequest(
                        replica_id=follower,
                        max_wait_ms=10_000,
                        session_id=session_id,
                        session_epoch=1,
                    )
                )
            )
            time.sleep(0.5)  # parked: nothing new for the session
            started = time.monotonic()
            stream.close()
            stream = Stream(endpoint, proof(tmp_path, STREAM_METHOD, follower))
            again = stream.ask(
                broker_pb2.FetchRequest(
                    replica_id=follower, max_wait_ms=0, session_id=session_id, session_epoch=1
                )
            )
            assert time.monotonic() - started < 5
            assert again.error_code == 0, again.error_message
            assert again.session_id == session_id
            stream.close()
        finally:
            cluster.kill(f"broker-{follower}", signal.SIGCONT)

        # The real follower's own stream moves the high watermark once it runs again.
        wait_until(
            "the high watermark at the log end", lambda: high_watermark(cluster, leader) == log_end
        )
        with Producer({**config, "acks": "all"}) as producer:
            producer.send(TOPIC, b"after", partition=0).result(timeout=30)
        assert high_watermark(cluster, leader) == log_end + 1


def test_a_killed_follower_reconnects_catches_up_and_moves_the_high_watermark(
    tmp_path: Path,
) -> None:
    with local_cluster(tmp_path, 1, 3, FAST_SETTINGS) as cluster:
        state = start_with_full_isr(cluster, 3)
        leader = state.leader
        follower = next(r for r in state.replicas if r != leader)
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers, "acks": "all"}
        with Producer(config) as producer:
            for i in range(200):
                producer.send(TOPIC, b"before-%d" % i, partition=0).result(timeout=30)
            cluster.kill(f"broker-{follower}")  # its stream breaks mid-long-poll
            for i in range(200):  # the other follower keeps min.insync.replicas met
                producer.send(TOPIC, b"during-%d" % i, partition=0).result(timeout=30)
            cluster.start(f"broker-{follower}")
            wait_until(
                "the restarted follower back in the ISR",
                lambda: (s := partition(cluster)).leader == leader and len(s.isr) == 3,
                60,
            )
            for i in range(200):
                producer.send(TOPIC, b"after-%d" % i, partition=0).result(timeout=30)
        assert high_watermark(cluster, leader) == 600
        with Consumer(
            {"bootstrap.servers": cluster.spec.bootstrap_servers, "auto.offset.reset": "earliest"}
        ) as consumer:
            consumer.assign([(TOPIC, 0)])
            values: list[bytes] = []
            while len(values) < 600:
                records = consumer.poll(timeout=30)
                assert records, f"nothing after {len(values)}"
                values += [record.value for record in records]
        assert values[:200] == [b"before-%d" % i for i in range(200)]
        assert values[200:400] == [b"during-%d" % i for i in range(200)]
        assert values[400:] == [b"after-%d" % i for i in range(200)]


class _FetchOnly(broker_pb2_grpc.BrokerServiceServicer):
    """A leader from before ReplicaFetchStream: Fetch only (the rest UNIMPLEMENTED)."""

    def __init__(self) -> None:
        self.fetches = 0

    async def Fetch(self, request, context):  # type: ignore[no-untyped-def]
        self.fetches += 1
        return broker_pb2.FetchResponse(session_id=7)


def test_a_leader_without_the_stream_is_fetched_from_with_unary_calls() -> None:
    async def run() -> None:
        server = grpc.aio.server()
        servicer = _FetchOnly()
        broker_pb2_grpc.add_BrokerServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        link = leader_link(MemberSigner(b"k" * 32, 2))
        try:
            for _ in range(3):
                answer = await link.fetch(channel, fetch(2, 0), ANSWER_WAIT_S)
                assert answer.session_id == 7
            assert link.unary_only and servicer.fetches == 3
        finally:
            link.close()
            await channel.close()
            await server.stop(None)

    asyncio.run(run())

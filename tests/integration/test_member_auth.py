"""Goal: only members of the cluster can act as a broker (issue 9, hole 2). A stranger who can
reach the ports but has not the cluster secret cannot register a broker, heartbeat or shut one
down, rewrite an ISR, take blocks of producer ids in a broker's name, or fetch as a follower —
which would move the high watermark, so acks=all would acknowledge records no follower has — and
a proof signed with another secret is refused the same way; the real brokers keep working. A
broker without a valid secret file does not start. Nor can a stranger write the internal topic
`__consumer_offsets`, where coordinators keep consumer-group state: a Produce to it must carry a
member's proof (as a coordinator's does), per call or, for a ProduceStream, as the stream opens;
reading it stays open.

Method: one controller and two brokers started by the launcher (which gives every process the
cluster secret), a topic with RF=2. The follower is paused (SIGSTOP) and records are produced with
acks=1, so the leader's log runs ahead of its high watermark: exactly the state in which a forged
follower fetch would move it. Every forged call must answer PERMISSION_DENIED naming the
missing proof, and the cluster's metadata (brokers, epochs, fencing, leader, leader epoch, ISR,
the next producer id: two blocks taken with the secret around the forged calls must be adjacent)
and the high watermark must be unchanged afterwards. Then the follower resumes; its own (signed)
fetches move the high watermark, and produce/consume work.

For the internal topic: one controller and one broker, a fake coordinator (registered with the
secret) so that the controller creates `__consumer_offsets` with one partition; an unsigned
Produce, one signed with another secret, an unsigned ProduceStream and one signed with another
secret are refused per partition and the partition's high watermark (its log end: one replica)
does not move; a Produce signed as the coordinator and a ProduceStream opened with the proof a
coordinator's stream carries are appended and read back with a consumer's Fetch.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import pytest
from cluster_helpers import (
    FAST_SETTINGS,
    FakeCoordinator,
    admin_write,
    controller_stub,
    local_cluster,
    member_metadata,
    wait_until,
)

from samsa.client import Consumer, Producer
from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch, decode_batches
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC
from samsa.services.runtime import membership
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.secret import load_secret
from samsa.v1 import broker_pb2, broker_pb2_grpc, controller_pb2

pytestmark = pytest.mark.timeout(240)

TOPIC = "guarded"
# Long sessions: the paused follower must stay registered and in the ISR while the test runs.
SETTINGS = {
    "broker.session.timeout.ms": "30000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "30000",
}
WRONG_SECRET = "w" * 43


def broker_stub(cluster, broker_id: int) -> broker_pb2_grpc.BrokerServiceStub:
    endpoint = next(b.endpoint for b in cluster.spec.brokers if b.broker_id == broker_id)
    return broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(endpoint))


def partition(cluster):
    answer = admin_write(
        cluster.spec, "DescribeTopics", controller_pb2.DescribeTopicsRequest(names=[TOPIC])
    )
    return answer.topics[0].partitions[0]


def brokers(cluster) -> dict[int, tuple[int, bool]]:
    answer = admin_write(cluster.spec, "DescribeCluster", controller_pb2.DescribeClusterRequest())
    return {b.broker_id: (b.broker_epoch, b.is_fenced) for b in answer.brokers}


def fetch_request(
    replica_id: int | None, offset: int, topic: str = TOPIC
) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(
        max_wait_ms=0,
        topics=[
            broker_pb2.FetchRequest.TopicData(
                name=topic,
                partitions=[
                    broker_pb2.FetchRequest.PartitionData(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    if replica_id is not None:
        request.replica_id = replica_id
    return request


def high_watermark(cluster, leader: int) -> int:
    """The leader's high watermark, asked as a consumer (no replica_id: open to anyone)."""
    answer = broker_stub(cluster, leader).Fetch(fetch_request(None, 0), timeout=5)
    result = answer.topics[0].partitions[0]
    assert result.error_code == 0, result.error_message
    return result.high_watermark


def assert_refused(call, request, metadata, *phrases: str) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=5, metadata=metadata)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, refused.value.details()
    for phrase in phrases:
        assert phrase in refused.value.details(), refused.value.details()


def signed_block(cluster, data_dir: Path, broker_id: int, broker_epoch: int) -> range:
    """A block of producer ids taken from the controller as `broker_id`, with the secret."""
    answer = controller_stub(cluster.spec.controllers[0].endpoint).AllocateProducerIds(
        controller_pb2.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch),
        timeout=10,
        metadata=member_metadata(data_dir, "AllocateProducerIds", broker_id),
    )
    assert answer.status.error_code == 0, answer.status.error_message
    return range(answer.producer_id_start, answer.producer_id_start + answer.producer_id_len)


def test_a_stranger_cannot_act_as_a_broker(tmp_path: Path) -> None:
    with local_cluster(tmp_path, controllers=1, brokers=2, settings=SETTINGS) as cluster:
        admin_write(
            cluster.spec,
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreateTopicsRequest.Topic(
                        name=TOPIC, num_partitions=1, replication_factor=2
                    )
                ]
            ),
        )
        state = wait_until(
            "a leader and a full ISR",
            lambda: (s := partition(cluster)).leader >= 0 and len(s.isr) == 2 and s,
            60,
        )
        leader = state.leader
        follower = next(r for r in state.replicas if r != leader)
        config = {"bootstrap.servers": cluster.spec.bootstrap_servers}
        with Producer({**config, "acks": "all"}) as producer:
            for i in range(5):
                producer.send(TOPIC, f"acked-{i}".encode(), partition=0).result(timeout=30)

        cluster.kill(f"broker-{follower}", signal.SIGSTOP)
        try:
            with Producer({**config, "acks": "1"}) as producer:
                sent = [
                    producer.send(TOPIC, f"leader-only-{i}".encode(), partition=0) for i in range(5)
                ]
                end = max(future.result(30).offset for future in sent) + 1  # the leader's log end
            watermark = high_watermark(cluster, leader)
            assert watermark < end, "the leader's log must run ahead of its high watermark"
            before = (brokers(cluster), partition(cluster))
            epochs = {broker_id: epoch for broker_id, (epoch, _) in before[0].items()}
            block_before = signed_block(cluster, tmp_path, leader, epochs[leader])

            controller = controller_stub(cluster.spec.controllers[0].endpoint)
            forged = {
                "RegisterBroker": controller_pb2.RegisterBrokerRequest(
                    broker_id=50,
                    incarnation_id=str(uuid.uuid4()),
                    endpoint="127.0.0.1:1",
                ),
                "BrokerHeartbeat": controller_pb2.BrokerHeartbeatRequest(
                    broker_id=leader,
                    broker_epoch=epochs[leader],
                    metadata_offset=10**12,
                    want_shutdown=True,
                ),
                "AlterPartition": controller_pb2.AlterPartitionRequest(
                    broker_id=leader,
                    broker_epoch=epochs[leader],
                    partitions=[
                        controller_pb2.AlterPartitionRequest.PartitionIsr(
                            topic=TOPIC,
                            partition=0,
                            leader_epoch=state.leader_epoch,
                            partition_epoch=0,
                            new_isr=[leader],
                        )
                    ],
                ),
                "AllocateProducerIds": controller_pb2.AllocateProducerIdsRequest(
                    broker_id=leader, broker_epoch=epochs[leader]
                ),
            }
            claimed = {
                "RegisterBroker": 50,
                "BrokerHeartbeat": leader,
                "AlterPartition": leader,
                "AllocateProducerIds": leader,
            }
            for method, request in forged.items():
                call = getattr(controller, method)
                what = f"{method} as broker_id={claimed[method]}"
                assert_refused(call, request, None, what, "must carry", "samsa-member-auth")
                wrong = member_metadata(tmp_path, method, claimed[method], secret=WRONG_SECRET)
                assert_refused(call, request, wrong, "another cluster secret")
            for partition_epoch in range(1, 4):  # whatever the stranger guesses
                forged["AlterPartition"].partitions[0].partition_epoch = partition_epoch
                assert_refused(controller.AlterPartition, forged["AlterPartition"], None)

            fetch = broker_stub(cluster, leader).Fetch
            forged_fetch = fetch_request(follower, end)
            assert_refused(
                fetch,
                forged_fetch,
                None,
                f"Fetch with replica_id={follower} must carry the cluster's membership proof "
                "(samsa-member-auth metadata); brokers get it from --secret-file",
            )
            wrong = member_metadata(tmp_path, "Fetch", follower, secret=WRONG_SECRET)
            assert_refused(fetch, forged_fetch, wrong, "another cluster secret")
            as_leader = member_metadata(tmp_path, "Fetch", leader)  # a member's, for another id
            assert_refused(fetch, forged_fetch, as_leader, f"the request claims {follower}")
            for_alter = member_metadata(tmp_path, "AlterPartition", follower)  # another call
            assert_refused(fetch, forged_fetch, for_alter, "for another call")

            assert high_watermark(cluster, leader) == watermark, "a forged fetch moved the HW"
            block_after = signed_block(cluster, tmp_path, leader, epochs[leader])
            assert block_after.start == block_before.stop, "a forged call took producer ids"
            assert (brokers(cluster), partition(cluster)) == before
            assert 50 not in brokers(cluster)
        finally:
            cluster.kill(f"broker-{follower}", signal.SIGCONT)

        # The leader's own (signed) AllocateProducerIds still works: its producers get ids.
        answer = broker_stub(cluster, leader).InitProducerId(
            broker_pb2.InitProducerIdRequest(), timeout=10
        )
        assert answer.error_code == 0 and answer.producer_id >= 0, answer.error_message
        wait_until(
            "the follower's own fetches to move the HW",
            lambda: high_watermark(cluster, leader) == end,
        )
        with Producer({**config, "acks": "all"}) as producer:
            producer.send(TOPIC, b"after", partition=0).result(timeout=30)
        with Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([(TOPIC, 0)])
            values: list[bytes] = []
            while len(values) < 11:
                records = consumer.poll(timeout=10)
                assert records, f"consumed {values}"
                values += [r.value for r in records]
        assert values[-1] == b"after" and values[0] == b"acked-0"
        assert not cluster.exited()


@pytest.mark.parametrize("mode", [None, 0o644])
def test_a_broker_refuses_to_start_without_a_valid_secret_file(tmp_path: Path, mode) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "cluster.secret"
    if mode is not None:
        secret.write_text("s" * 43)
        secret.chmod(mode)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "samsa.services.broker",
            "--broker-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--controllers",
            "127.0.0.1:1",
            "--data-dir",
            str(tmp_path / "b"),
            "--secret-file",
            str(secret),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    expected = "chmod 600" if mode else "controllers and brokers refuse to start without one"
    assert result.stderr.startswith(f"samsa broker: the cluster secret file {secret}")
    assert expected in result.stderr


def offsets_produce(value: bytes) -> broker_pb2.ProduceRequest:
    data = broker_pb2.ProduceRequest.PartitionData(
        partition=0, records=build_batch([value], keys=[b"k"])
    )
    return broker_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topics=[
            broker_pb2.ProduceRequest.TopicData(name=CONSUMER_OFFSETS_TOPIC, partitions=[data])
        ],
    )


def offsets_end(stub: broker_pb2_grpc.BrokerServiceStub) -> int | None:
    """`__consumer_offsets`-0's high watermark (its log end offset: it has one replica), or None
    while this broker does not lead it."""
    wanted = broker_pb2.ListOffsetsRequest.PartitionData(
        partition=0, offset_spec=broker_pb2.OFFSET_SPEC_LATEST
    )
    answer = stub.ListOffsets(
        broker_pb2.ListOffsetsRequest(
            topics=[
                broker_pb2.ListOffsetsRequest.TopicData(
                    name=CONSUMER_OFFSETS_TOPIC, partitions=[wanted]
                )
            ]
        ),
        timeout=5,
    )
    result = answer.topics[0].partitions[0]
    return result.offset if result.error_code == ErrorCode.NONE else None


def assert_internal_refused(result, *phrases: str) -> None:  # type: ignore[no-untyped-def]
    assert result.error_code == ErrorCode.INVALID_REQUEST, result
    assert result.base_offset == -1
    for phrase in ("__consumer_offsets is internal", "nothing was written", *phrases):
        assert phrase in result.error_message, result.error_message


def test_only_members_write_the_internal_offsets_topic(tmp_path: Path) -> None:
    settings = dict(FAST_SETTINGS) | {
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
    }
    with local_cluster(tmp_path, controllers=1, brokers=1, settings=settings) as cluster:
        key = membership.derive_key(load_secret(tmp_path / "cluster.secret"))
        coordinator = FakeCoordinator(cluster.spec.controllers[0].endpoint, key, 1)
        coordinator.start()
        try:
            stub = broker_stub(cluster, cluster.spec.brokers[0].broker_id)
            end = wait_until(
                "__consumer_offsets-0 led by the broker",
                lambda: (offset := offsets_end(stub)) is not None and (offset,),
                60,
            )[0]

            unsigned = stub.Produce(offsets_produce(b"forged"), timeout=10)
            assert_internal_refused(
                unsigned.topics[0].partitions[0], "carries no samsa-member-auth metadata"
            )
            wrong = member_metadata(tmp_path, "Produce", 1, secret=WRONG_SECRET)
            forged = stub.Produce(offsets_produce(b"forged"), timeout=10, metadata=wrong)
            assert_internal_refused(forged.topics[0].partitions[0], "another cluster secret")

            def stream_one(value: bytes, metadata=None):  # type: ignore[no-untyped-def]
                request = broker_pb2.ProduceStreamRequest(
                    correlation_id=7, request=offsets_produce(value)
                )
                streamed = list(stub.ProduceStream(iter([request]), timeout=10, metadata=metadata))
                assert [answer.correlation_id for answer in streamed] == [7]
                return streamed[0].response.topics[0].partitions[0]

            assert_internal_refused(stream_one(b"forged"), "the stream carries no membership proof")
            wrong_stream = member_metadata(tmp_path, "ProduceStream", 1, secret=WRONG_SECRET)
            assert_internal_refused(stream_one(b"forged", wrong_stream), "another cluster secret")
            assert offsets_end(stub) == end, "a refused Produce wrote to __consumer_offsets"

            # Exactly what a coordinator sends (services/coordinator/offsets_log.py).
            service = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name
            signed = MemberSigner(key, 1).metadata(membership.method_path(service, "Produce"))
            answer = stub.Produce(offsets_produce(b"group state"), timeout=10, metadata=signed)
            result = answer.topics[0].partitions[0]
            assert (result.error_code, result.base_offset) == (ErrorCode.NONE, end), result
            assert offsets_end(stub) == end + 1
            # And what a coordinator's stream carries as it opens (internal_produce_stream.py).
            proof = MemberSigner(key, 1).metadata(membership.method_path(service, "ProduceStream"))
            result = stream_one(b"streamed state", proof)
            assert (result.error_code, result.base_offset) == (ErrorCode.NONE, end + 1), result
            assert offsets_end(stub) == end + 2

            read = stub.Fetch(fetch_request(None, end, topic=CONSUMER_OFFSETS_TOPIC), timeout=5)
            fetched = read.topics[0].partitions[0]
            assert fetched.error_code == ErrorCode.NONE, fetched.error_message
            values = [v for batch in decode_batches(fetched.records) for v in batch.values]
            assert values == [b"group state", b"streamed state"]
        finally:
            coordinator.stop_heartbeating()

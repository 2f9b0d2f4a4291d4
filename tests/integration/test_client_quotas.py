"""Goal: client quotas hold real clients to their byte rates (KIP-13, KIP-219): a producer whose
client.id has producer_byte_rate=262144 produces at most about that fast, and a consumer with a
consumer_byte_rate likewise, their answers carrying throttle_time_ms > 0; removing the quota
lifts the throttle (the answers carry 0). Unary Produce and Fetch calls that name the client in
their metadata are held to quotas too, the default entity's for a client.id without its own.
`samsa quotas` sets, describes and removes them in Kafka's words, and refuses a key Samsa lacks.

Method: 1 controller, 1 broker (real processes, killed by PID on the way out). Quotas are set
with the SDK's Admin bootstrapped from the broker (the write is forwarded to the controller);
reading them back through the broker waits until the broker applied them (read your writes
from its own image), so the clients start only once the broker throttles. The SDK producer
(client.id "slow", acks=1) sends ~1.5 MB to one partition; the SDK consumer (client.id
"slow-reader") reads it all back. Each rate is measured from the first send (or the
assignment) to the last acknowledgement (or record) and bounded one way only, at 1.6x the quota:
a slow machine only lowers it. The answers are observed in the SDK itself, by wrapping the
producer's answer handler and the consumer's fetch link, so the throttle_time_ms seen is what
the broker put in the answers those clients got.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, open_channel, wait_until

from samsa.cli.launcher import LocalCluster
from samsa.cli.main import main as samsa_main
from samsa.client import Admin, Consumer, Producer, QuotaEntity
from samsa.client.produce_sender import ProduceSender
from samsa.common.fetch_link import FetchLink
from samsa.common.record.codec import build_batch
from samsa.metadata.client_quotas import CLIENT_ID_METADATA_KEY
from samsa.v1 import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.timeout(300)

TOPIC = "quota-bound"
QUOTA = 262_144  # bytes per second
RECORD = b"q" * 8_000
RECORDS = 190  # ~1.5 MB
RATE_FACTOR_MAX = 1.6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("quotas"), 1, 1, FAST_SETTINGS) as running:
        yield running


@pytest.fixture
def throttles(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """The throttle_time_ms of every produce and fetch answer the SDK's clients get."""
    seen: dict[str, list[int]] = {"produce": [], "fetch": []}
    on_response, fetch = ProduceSender._on_response, FetchLink.fetch

    def record_produce(self, response, error, by_partition):  # type: ignore[no-untyped-def]
        if response is not None:
            seen["produce"].append(response.throttle_time_ms)
        return on_response(self, response, error, by_partition)

    async def record_fetch(self, channel, request, timeout_s):  # type: ignore[no-untyped-def]
        response = await fetch(self, channel, request, timeout_s)
        seen["fetch"].append(response.throttle_time_ms)
        return response

    monkeypatch.setattr(ProduceSender, "_on_response", record_produce)
    monkeypatch.setattr(FetchLink, "fetch", record_fetch)
    return seen


def set_quotas(admin: Admin, entity: str | None, changes: dict[str, float | None]) -> None:
    """Set (or remove: None) the entity's quotas (None: the default entity) and wait until the
    broker answers from an image that has the change."""
    admin.alter_client_quotas({entity: changes})

    def applied() -> bool:
        described = admin.describe_client_quotas(entity, default=entity is None)
        key = QuotaEntity(client_id=QuotaEntity.DEFAULT if entity is None else entity)
        values = described.get(key, {})
        return all(values.get(key) == value for key, value in changes.items())

    wait_until(f"the broker to apply {changes} of {entity}", applied)


def produce(bootstrap: str, client_id: str, count: int) -> float:
    """Send `count` records as `client_id` (acks=1); the seconds from the first send to the
    last acknowledgement."""
    config = {"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1"}
    with Producer(config) as producer:
        producer.send(TOPIC, b"warm-up", partition=0).result(timeout=30)  # metadata, stream open
        started = time.monotonic()
        futures = [producer.send(TOPIC, RECORD, partition=0) for _ in range(count)]
        producer.flush(60)
        for future in futures:
            future.result(timeout=0)
        return time.monotonic() - started


def unary_throttles(bootstrap: str, client_id: str) -> tuple[int, int]:
    """throttle_time_ms of a unary Produce (~400 KB, over one second of QUOTA) and then a unary
    Fetch of up to 1 MiB from offset 0, naming `client_id` in their metadata as a client without
    the SDK would."""
    stub = broker_pb2_grpc.BrokerServiceStub(open_channel(bootstrap))
    metadata = ((CLIENT_ID_METADATA_KEY, client_id),)
    produce = broker_pb2.ProduceRequest(acks=1, timeout_ms=30_000)
    data = produce.topics.add(name=TOPIC).partitions.add(partition=0)
    data.records = build_batch([RECORD] * 50)
    produced = stub.Produce(produce, metadata=metadata, timeout=60)
    assert produced.topics[0].partitions[0].error_code == 0, produced
    fetch = broker_pb2.FetchRequest(max_wait_ms=0, max_bytes=1 << 20)
    fetch.topics.add(name=TOPIC).partitions.add(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    fetched = stub.Fetch(fetch, metadata=metadata, timeout=60)
    assert fetched.topics[0].partitions[0].records, fetched.topics[0].partitions[0].error_message
    return produced.throttle_time_ms, fetched.throttle_time_ms


def test_quotas_bound_a_producer_and_a_consumer_and_lifting_them_lifts_the_throttle(
    cluster: LocalCluster, throttles: dict[str, list[int]]
) -> None:
    bootstrap = cluster.spec.brokers[0].endpoint
    admin = Admin({"bootstrap.servers": bootstrap})
    try:
        admin.create_topic(TOPIC, num_partitions=1, replication_factor=1)
        set_quotas(admin, "slow", {"producer_byte_rate": QUOTA})

        elapsed_s = produce(bootstrap, "slow", RECORDS)
        rate = RECORDS * len(RECORD) / elapsed_s
        print(f"produced {rate:.0f} B/s ({rate / QUOTA:.2f}x the quota) in {elapsed_s:.1f} s")
        assert rate <= RATE_FACTOR_MAX * QUOTA, f"produced at {rate:.0f} B/s over {elapsed_s:.1f} s"
        assert max(throttles["produce"]) > 0, throttles["produce"]

        set_quotas(admin, "slow-reader", {"consumer_byte_rate": QUOTA})
        config = {
            "bootstrap.servers": bootstrap,
            "client.id": "slow-reader",
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": 65_536,
        }
        read = 0
        with Consumer(config) as consumer:
            consumer.assign([(TOPIC, 0)])
            started = time.monotonic()
            while read < RECORDS * len(RECORD):
                assert time.monotonic() - started < 120, f"read only {read} bytes"
                read += sum(len(r.value or b"") for r in consumer.poll(timeout=1))
            elapsed_s = time.monotonic() - started
        rate = read / elapsed_s
        print(f"consumed {rate:.0f} B/s ({rate / QUOTA:.2f}x the quota) in {elapsed_s:.1f} s")
        assert rate <= RATE_FACTOR_MAX * QUOTA, f"consumed at {rate:.0f} B/s over {elapsed_s:.1f} s"
        assert max(throttles["fetch"]) > 0, throttles["fetch"]

        # Unary calls name the client per call; a client.id without quotas of its own (new to
        # the broker: one second counted, whatever the machine's speed) gets the default's.
        both = {"producer_byte_rate": QUOTA, "consumer_byte_rate": QUOTA}
        set_quotas(admin, None, both)
        produced_ms, fetched_ms = unary_throttles(bootstrap, "unary-1")
        assert produced_ms > 0 and fetched_ms > 0, (produced_ms, fetched_ms)

        set_quotas(admin, "slow", {"producer_byte_rate": None})
        set_quotas(admin, "slow-reader", {"consumer_byte_rate": None})
        set_quotas(admin, None, {"producer_byte_rate": None, "consumer_byte_rate": None})
        assert admin.describe_client_quotas() == {}
        throttles["produce"].clear()
        produce(bootstrap, "slow", 40)
        assert throttles["produce"] and set(throttles["produce"]) == {0}, throttles["produce"]
        assert unary_throttles(bootstrap, "unary-1") == (0, 0)
    finally:
        admin.close()
    assert cluster.exited() == {}


def test_the_cli_sets_describes_and_removes_quotas(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    via = ["--bootstrap-server", cluster.spec.brokers[0].endpoint]

    def described(*flags: str) -> str:
        """What `samsa quotas --describe` prints (each run is a new client: the broker may
        not have applied the last change yet, so callers wait for what they expect)."""
        capsys.readouterr()
        assert samsa_main(["quotas", "--describe", *flags, *via]) == 0
        return capsys.readouterr().out.strip()

    add = ["--add", "producer_byte_rate=1048576,consumer_byte_rate=2097152"]
    assert samsa_main(["quotas", "--alter", "--client-id", "cli", *add, *via]) == 0
    assert "Completed updating quotas for client-id 'cli'" in capsys.readouterr().out
    expected = (
        "Quota configs for client-id 'cli' are consumer_byte_rate=2097152.0, "
        "producer_byte_rate=1048576.0"
    )
    wait_until("the quotas described", lambda: described("--client-id", "cli") == expected)
    delete = ["--delete", "producer_byte_rate,consumer_byte_rate"]
    assert samsa_main(["quotas", "--alter", "--client-id", "cli", *delete, *via]) == 0
    wait_until("no quotas described", lambda: described() == "no client quotas are set")
    capsys.readouterr()
    refused = ["--alter", "--client-defaults", "--add", "request_percentage=50"]
    assert samsa_main(["quotas", *refused, *via]) == 1
    assert "unknown quota key 'request_percentage'" in capsys.readouterr().err

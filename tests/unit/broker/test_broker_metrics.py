"""Goal: the broker's metrics say what happened, and only that: records and bytes in per produced
batch (a retried batch adds nothing), bytes out once per fetch answer, split between consumers
and followers, ISR shrinks and expands once the controller accepts them, and gauges (partitions
led and followed, under-replicated, under-min-ISR, producer ids) computed from the hosted
partitions; a topic's series end once no partition of it is hosted here.

Method: the pure `broker_gauges` and `isr_change_counts` over stand-ins; then `BrokerMetrics` on a
meter of a private MeterProvider with an in-memory reader, installed on a real PartitionHost
(logs in a temp dir) and driven through `produce`, `fetch` and the ISR manager's `_Proposals`;
the per-topic counters are read from the tables the broker serves beside its instruments.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from test_broker_requests import fetch_request, image, produce_request, replicated_host

from samsa.common.record.codec import build_batch
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.broker.broker_gauges import BrokerGauges, broker_gauges, isr_change_counts
from samsa.services.broker.broker_metrics import NO_METRICS, BrokerMetrics, for_broker
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica import isr_manager
from samsa.services.broker.replica.isr_manager import Proposal
from samsa.services.broker.replica.partition_replica import PartitionReplica
from samsa.services.broker.requests.fetch import fetch
from samsa.services.broker.requests.produce import produce
from samsa.v1 import controller_pb2 as c


def hosted(leader: bool, isr: int, replicas: int, min_isr: int = 1, producers: int = 0):
    return SimpleNamespace(
        is_leader=leader,
        isr=tuple(range(isr)),
        replica_count=replicas,
        min_insync_replicas=min_isr,
        producer_count=producers,
    )


def test_gauges_count_led_partitions_by_their_isr_and_every_replica_by_its_producers():
    partitions = [
        hosted(True, isr=3, replicas=3, producers=2),
        hosted(True, isr=2, replicas=3, min_isr=2),  # under-replicated only
        hosted(True, isr=1, replicas=3, min_isr=2, producers=1),  # both
        hosted(False, isr=1, replicas=3, min_isr=2, producers=4),  # a follower: neither
    ]
    assert broker_gauges(partitions) == BrokerGauges(
        partitions_led=3, partitions_followed=1, under_replicated=2, under_min_isr=1, producer_ids=7
    )
    assert broker_gauges([]) == BrokerGauges()


@pytest.mark.parametrize(
    ("old", "new", "counts"),
    [
        ((1, 2, 3), (1, 2), (1, 0)),
        ((1,), (1, 3), (0, 1)),
        ((1, 2), (1, 3), (1, 1)),
        ((1,), (1,), (0, 0)),
    ],
)
def test_an_isr_change_is_a_shrink_an_expand_or_both(old, new, counts):
    assert isr_change_counts(old, new) == counts


def test_metrics_off_means_no_instruments():
    assert for_broker() is NO_METRICS  # metrics.start never ran in this process


class Meter:
    """A private meter provider and a reader: the points by metric name and attributes."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def meter(self):  # type: ignore[no-untyped-def]
        return self.provider.get_meter("test")

    def points(self) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        key = tuple(sorted((point.attributes or {}).items()))
                        found.setdefault(metric.name, {})[key] = point.value
        return found


def topic_counts(instruments: BrokerMetrics) -> dict[str, dict[tuple[str, ...], float]]:
    """The per-topic tables (served beside the instruments) by Prometheus family name."""
    return {table.name: table.values() for table in instruments.topic_series.tables}


@pytest.fixture
def metered(tmp_path: Path):  # type: ignore[no-untyped-def]
    meter = Meter()
    host = PartitionHost(tmp_path, broker_id=1)
    host.metrics = BrokerMetrics(meter.meter())
    new = image()
    host.apply(new, partition_changes(MetadataImage.empty(), new, 1), now_ms=0)
    yield host, meter
    host.close_all()
    meter.provider.shutdown()


def test_produce_counts_records_and_bytes_per_batch_and_fetch_counts_the_answer(metered):
    host, _ = metered
    batch = build_batch([b"a", b"b", b"c"])
    produce(host, produce_request(0, batch), 5)
    produce(host, produce_request(1, batch), 5)
    response = asyncio.run(fetch(host, fetch_request(0, 0, max_wait_ms=0)))
    counts = topic_counts(host.metrics)
    assert counts["samsa_broker_records_in"] == {("t",): 6}
    io = counts["samsa_broker_io_bytes"]
    assert io[("t", "in", "producer")] == 2 * len(batch)
    sent = len(response.topics[0].partitions[0].records)
    assert sent == len(batch)
    assert io[("t", "out", "consumer")] == sent


def test_a_retried_idempotent_batch_adds_nothing(metered):
    host, _ = metered
    batch = build_batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0)
    for _ in range(2):
        produce(host, produce_request(0, batch), 5)
    assert topic_counts(host.metrics)["samsa_broker_records_in"] == {("t",): 1}


def test_follower_fetches_count_as_replication_and_gauges_follow_the_isr(tmp_path):
    meter = Meter()
    host = replicated_host(tmp_path, isr=(1,))  # 3 replicas, min.insync.replicas=2
    host.metrics = BrokerMetrics(meter.meter())
    batch = build_batch([b"a", b"b"])
    produce(host, produce_request(0, batch), 5)
    request = fetch_request(0, 0, max_wait_ms=0)
    request.replica_id = 2
    asyncio.run(fetch(host, request))
    host.metrics.refresh(host.partitions.values())
    points = meter.points()
    io = topic_counts(host.metrics)["samsa_broker_io_bytes"]
    assert io[("t", "out", "follower")] == len(batch)
    assert ("t", "out", "consumer") not in io
    assert points["samsa.broker.partitions"] == {
        (("role", "leader"),): 1,
        (("role", "follower"),): 0,
    }
    assert points["samsa.broker.partitions.under_replicated"] == {(): 1}
    assert points["samsa.broker.partitions.under_min_isr"] == {(): 1}
    assert points["samsa.broker.producer_ids"] == {(): 0}
    host.close_all()
    meter.provider.shutdown()


def test_a_topic_no_longer_hosted_here_loses_its_series(metered):
    """Kafka removes a topic's metrics when it leaves the broker: deleted topics must not stay
    exported for ever (nor fill the exporter's label sets)."""
    host, _ = metered
    produce(host, produce_request(0, build_batch([b"a"])), 5)
    host.metrics.refresh(host.partitions.values())
    assert topic_counts(host.metrics)["samsa_broker_records_in"] == {("t",): 1}
    host.metrics.refresh([])  # the topic was deleted: nothing of it is hosted here
    assert all(not values for values in topic_counts(host.metrics).values())


def test_isr_changes_are_counted_once_accepted(tmp_path):
    meter = Meter()
    instruments = BrokerMetrics(meter.meter())
    stand_in = SimpleNamespace(
        broker_id=1,
        metrics=instruments,
        partitions={("t", p): SimpleNamespace(replica=PartitionReplica(1)) for p in range(3)},
    )

    class Channel:
        async def write(self, method: str, request: c.AlterPartitionRequest):  # type: ignore[no-untyped-def]
            response = c.AlterPartitionResponse()
            for item in request.partitions:
                result = response.partitions.add(topic=item.topic, partition=item.partition)
                if item.partition == 2:  # refused: not counted
                    result.error_code = 1  # type: ignore[assignment]
            return response

    decided = [
        Proposal("t", 0, 1, 0, isr=(1,), previous_isr=(1, 2)),  # shrink
        Proposal("t", 1, 1, 0, isr=(1, 2, 3), previous_isr=(1, 2)),  # expand
        Proposal("t", 2, 1, 0, isr=(1,), previous_isr=(1, 2)),  # refused
    ]

    async def run() -> None:
        manager = isr_manager._Proposals(stand_in, Channel(), lambda: 9)  # type: ignore[arg-type]
        manager.start(decided)
        while manager.busy:
            await asyncio.sleep(0)

    asyncio.run(run())
    points = meter.points()
    assert points["samsa.broker.isr.shrinks"] == {(): 1}
    assert points["samsa.broker.isr.expands"] == {(): 1}
    meter.provider.shutdown()


def test_replicas_a_reassignment_adds_do_not_make_a_partition_under_replicated():
    """KIP-455, as Kafka counts it: while a move runs, the ISR is measured against the replicas
    without the ones still being added, so a partition moving off a healthy broker is not
    reported under-replicated before anything is wrong."""
    moving = PartitionState(0, (2, 3, 1), (1,), 1, 0, 1, adding=(2, 3), removing=(1,))
    count = HostedPartition.replica_count.fget(SimpleNamespace(state=moving))  # type: ignore[attr-defined]
    assert count == 1
    gauges = broker_gauges([hosted(True, isr=1, replicas=count)])
    assert gauges.under_replicated == 0
    settled = PartitionState(0, (2, 3), (2,), 2, 1, 2)
    assert HostedPartition.replica_count.fget(SimpleNamespace(state=settled)) == 2  # type: ignore[attr-defined]

"""Goal: a controller's gauges read its committed image: the active one reports the cluster
(brokers fenced and unfenced, topics, partitions, offline partitions, coordinators live and
fenced), a standby only itself (not active, its applied offset), so sums over the quorum are the
cluster's values; the exporter's callbacks compute them once per image.

Method: `controller_gauges` over hand-built images; `register` on a private MeterProvider's meter
with an in-memory reader, over a source the test changes.
"""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from samsa.metadata.image import (
    NO_LEADER,
    BrokerRegistration,
    CoordinatorRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from samsa.services.controller import controller_metrics
from samsa.services.controller.controller_gauges import ControllerGauges, controller_gauges


def cluster_image() -> MetadataImage:
    partitions = {
        0: PartitionState(0, (1, 2), (1, 2), 1, 0, 0),
        1: PartitionState(1, (2, 3), (), NO_LEADER, 1, 1),
    }
    return MetadataImage(
        end_offset=42,
        hash=b"\x00" * 16,
        timestamp_ms=0,
        brokers={
            1: BrokerRegistration(1, "a", "h:1", "", 0, fenced=False),
            2: BrokerRegistration(2, "b", "h:2", "", 0, fenced=False),
            3: BrokerRegistration(3, "c", "h:3", "", 0, fenced=True),
        },
        topics={
            "t": TopicImage("t", b"\x01" * 16, partitions),
            "u": TopicImage("u", b"\x02" * 16, {0: PartitionState(0, (1,), (1,), 1, 0, 0)}),
        },
        topic_names={},
        configs={},
        coordinators={
            1: CoordinatorRegistration(1, "x", "h:9", 5),
            2: CoordinatorRegistration(2, "y", "h:8", 6, fenced=True),
        },
    )


def test_the_active_controller_reports_the_cluster():
    assert controller_gauges(cluster_image(), active=True) == ControllerGauges(
        active=1,
        metadata_offset=41,
        brokers_fenced=1,
        brokers_unfenced=2,
        topics=2,
        partitions=3,
        partitions_offline=1,
        coordinators_live=1,
        coordinators_fenced=1,
    )


def test_a_standby_reports_only_its_applied_offset():
    assert controller_gauges(cluster_image(), active=False) == ControllerGauges(metadata_offset=41)
    assert controller_gauges(MetadataImage.empty(), active=False).metadata_offset == -1


def test_the_registered_gauges_follow_the_source_and_compute_once_per_image(monkeypatch):
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    state = {"image": cluster_image(), "active": True}
    computed: list[bool] = []
    real = controller_metrics.controller_gauges

    def counting(image, *, active):  # type: ignore[no-untyped-def]
        computed.append(active)
        return real(image, active=active)

    monkeypatch.setattr(controller_metrics, "controller_gauges", counting)
    controller_metrics.register(
        lambda: (state["image"], state["active"]), provider.get_meter("test")
    )

    def points() -> dict[str, dict[tuple, float]]:
        found: dict[str, dict[tuple, float]] = {}
        for scope in reader.get_metrics_data().resource_metrics[0].scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = tuple(sorted((point.attributes or {}).items()))
                    found.setdefault(metric.name, {})[key] = point.value
        return found

    first = points()
    assert first["samsa.controller.active"] == {(): 1}
    assert first["samsa.controller.brokers"] == {
        (("state", "fenced"),): 1,
        (("state", "unfenced"),): 2,
    }
    assert first["samsa.controller.partitions.offline"] == {(): 1}
    assert first["samsa.controller.coordinators"] == {
        (("state", "live"),): 1,
        (("state", "fenced"),): 1,
    }
    assert computed == [True], "seven instruments, one computation"
    state["active"] = False
    second = points()
    assert second["samsa.controller.active"] == {(): 0}
    assert second["samsa.controller.partitions"] == {(): 0}
    assert second["samsa.controller.metadata.offset"] == {(): 41}
    provider.shutdown()

"""The pieces of the replication simulation's cluster (replication_sim.py), and the controller's
own decisions that build its metadata: one partition of TOPIC on BROKERS, each broker a
`Broker` (its data directory, its `PartitionHost` while it runs, its fetch in flight, what of
its log is on disk).

`commit`, `registered`, `heartbeat` and `cluster_with_topic` make metadata images the way the
controller does (control_plane's decisions, replayed); tests that drive one broker by hand
(test_maximal_isr.py, test_leader_epoch_start.py, test_partition_refresh_cost.py) use them too.

`ClusterState` is what the simulation's parts share. `Simulation` is assembled from mixins, one
per job (producers, faults, maintenance, checks), each over `ClusterState`: it declares the
state `Simulation.__init__` sets and stubs the methods one part calls on another, so each part
reads as a plain class and the stubs, last in the method order, are always overridden.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from samsa.common.fetch_session_client import FetchPosition
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.log.cleaner import Cleaned, CleaningJob
from samsa.services.broker.maintenance import Pending
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.controller import control_plane as cp
from samsa.services.controller.liveness import BrokerLiveness
from samsa.v1 import broker_pb2
from samsa.v1 import controller_pb2 as c

TOPIC = "sim"
KEY = (TOPIC, 0)
BROKERS = (1, 2, 3)
LAG_MAX_MS = 1_000  # replica.lag.time.max.ms, on the simulation's clock
# Small segments, so truncation and reads cross segment boundaries.
TOPIC_CONFIGS = {"min.insync.replicas": "2", "segment.bytes": "2048", "max.message.bytes": "1024"}
DEFAULTS = cp.ClusterDefaults(num_partitions=1, default_replication_factor=3)


@dataclass
class InFlightFetch:
    leader_id: int
    sent: FetchPosition
    answer: broker_pb2.FetchResponse.PartitionResponse


@dataclass
class Broker:
    broker_id: int
    data_dir: Path
    host: PartitionHost | None = None
    incarnation: int = 0
    fetch: InFlightFetch | None = None
    pending: Pending = field(default_factory=Pending)
    # How far its log is on disk (fsynced, in this incarnation or an earlier one): the
    # in-memory recovery point starts at the checkpointed one after an open, below it.
    durable_end: int = 0
    # After a power loss: the offset its log was fsynced up to; the rest is lost at restart.
    fsynced_end: int | None = None
    # After a controlled shutdown: the broker epoch its clean-shutdown file names (KIP-966),
    # which its next registration sends; -1 after a kill or a power loss (no file).
    clean_shutdown_epoch: int = -1
    # A compaction pass planned and not yet swapped in (the cleaner's worker thread runs it
    # meanwhile): the job, and what it made once it ran.
    cleaning: tuple[CleaningJob, Cleaned | None] | None = None

    @property
    def alive(self) -> bool:
        return self.host is not None

    def hosted(self) -> HostedPartition | None:
        return None if self.host is None else self.host.get(*KEY)


def commit(image: MetadataImage, result: cp.ControlResult) -> MetadataImage:  # type: ignore[type-arg]
    if not result.records:
        return image
    return replay(image, make_batch(image, result.records, 0))


def registered(
    image: MetadataImage,
    broker_id: int,
    incarnation: str,
    *,
    now_ms: int,
    previous_broker_epoch: int = -1,
) -> MetadataImage:
    """`image` after broker `broker_id` registers (fenced) as `incarnation`, naming the epoch
    its data directory last stopped cleanly under (-1: a crash, or a new directory)."""
    request = c.RegisterBrokerRequest(
        broker_id=broker_id,
        incarnation_id=incarnation,
        endpoint=f"h:{broker_id}",
        previous_broker_epoch=previous_broker_epoch,
    )
    registration = cp.register_broker(
        image, request, liveness=BrokerLiveness(), now_ms=now_ms, session_timeout_ms=LAG_MAX_MS
    )
    return commit(image, registration)


def heartbeat(
    image: MetadataImage, broker_id: int, applied: int, *, want_shutdown: bool = False
) -> MetadataImage:
    """`image` after a heartbeat of broker `broker_id`, which applied the log up to `applied`
    (unfenced once that covers its registration; fenced when it asks to shut down)."""
    request = c.BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=image.brokers[broker_id].broker_epoch,
        metadata_offset=applied,
        want_shutdown=want_shutdown,
    )
    return commit(image, cp.broker_heartbeat(image, request))


def cluster_with_topic(configs: dict[str, str], rng: random.Random) -> MetadataImage:
    """BROKERS registered (incarnation "i1") and unfenced, and TOPIC with one partition on all
    three, placed by the controller with `rng`."""
    image = MetadataImage.empty()
    for broker_id in BROKERS:
        image = registered(image, broker_id, "i1", now_ms=0)
        image = heartbeat(image, broker_id, image.end_offset)
    topic = c.CreateTopicsRequest.Topic(
        name=TOPIC, num_partitions=1, replication_factor=len(BROKERS), configs=configs
    )
    created = cp.create_topics(
        image,
        c.CreateTopicsRequest(topics=[topic]),
        rng=rng,
        defaults=DEFAULTS,
        new_topic_id=lambda: b"s" * 16,
    )
    assert created.response.topics[0].error_code == 0, created.response
    return commit(image, created)


class ClusterState:
    """What the simulation's parts share: the state `Simulation.__init__` sets, and the methods
    one part calls on another (stubs here, defined by the part named)."""

    rng: random.Random
    now_ms: int
    image: MetadataImage
    brokers: dict[int, Broker]
    counts: Counter[str]
    compaction: bool
    deleted_below: int
    acked: dict[int, bytes]
    checked: dict[int, int]

    # The simulation's (replication_sim.py).

    def state(self) -> PartitionState:
        raise NotImplementedError  # the partition in its metadata image

    def _live(self) -> list[Broker]:
        raise NotImplementedError  # the brokers running now

    def _commit(self, result: cp.ControlResult) -> None:  # type: ignore[type-arg]
        raise NotImplementedError

    def _register(self, broker_id: int) -> None:
        raise NotImplementedError

    def _start(self, broker: Broker) -> None:
        raise NotImplementedError

    def _apply_metadata(self, broker: Broker) -> None:
        raise NotImplementedError

    # The producers' (replication_producers.py).

    def _settle(self) -> None:
        raise NotImplementedError

    def _forget_produces(self, broker_id: int) -> None:
        raise NotImplementedError

    # The log upkeep's (replication_maintenance.py).

    def _stop_cleaning(self, broker: Broker, *, discard: bool) -> None:
        raise NotImplementedError

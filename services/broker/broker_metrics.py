"""The broker's instruments: what a Kafka operator watches on a broker, as OpenTelemetry metrics.

Counters (added on the request path, once per batch and partition, never per record). The
per-topic ones are not OpenTelemetry instruments but tables served beside them under the names
the exporter gave them (`samsa_broker_records_in_total`, `samsa_broker_records_out_total`,
`samsa_broker_io_bytes_total`; runtime/labelled_series.py says why): a topic's series end when
no partition of it is hosted here any more (`refresh`), so deleted topics do not stay exported
for ever nor, after 2,000 of them, push every new topic into one unlabelled overflow series.
- `samsa.broker.records.in` {topic}: records appended by produce (Kafka's MessagesInPerSec); a
  retried batch the log already held adds nothing;
- `samsa.broker.io` (bytes) {topic, direction, peer}: batch bytes appended by producers
  (direction=in, peer=producer: BytesInPerSec) and sent in fetch answers to consumers
  (direction=out, peer=consumer: BytesOutPerSec) and to followers (direction=out, peer=follower:
  ReplicationBytesOutPerSec). Bytes out are counted once per answer sent, from the stored bytes
  read (a long-poll pass that is read again later is not counted twice);
- `samsa.broker.isr.shrinks` / `samsa.broker.isr.expands`: ISR changes this broker proposed as
  leader and the controller accepted (IsrShrinksPerSec / IsrExpandsPerSec);
- `samsa.broker.replication.throttled.bytes` / `samsa.broker.replication.throttle.events`
  {side=leader|follower}: bytes moved for throttled replicas, and the times one was held back
  because the quota was used up (KIP-73; replica/replication_throttle.py).

Gauges (observable: the exporter's thread calls them at scrape time and reads the frozen
`BrokerGauges` the maintenance loop last computed on the event loop, never the live dicts):
- `samsa.broker.partitions` {role=leader|follower};
- `samsa.broker.partitions.under_replicated`, `samsa.broker.partitions.under_min_isr`;
- `samsa.broker.producer_ids`.

With metrics off (`metrics.enabled()` False) `for_broker` hands out `NO_METRICS`, whose methods
do nothing and whose `refresh` computes nothing: no instrument is created at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from samsa.services.broker.broker_gauges import BrokerGauges, HostedView, broker_gauges
from samsa.services.runtime import metrics
from samsa.services.runtime.labelled_series import CounterTable, LabelledSeries

IO_LABELS = ("topic", "direction", "peer")


class NoBrokerMetrics:
    """Metrics off: every call is a no-op."""

    def produced(self, topic: str, record_count: int, size_bytes: int) -> None:
        pass

    def fetched(
        self,
        bytes_by_topic: Mapping[str, int],
        records_by_topic: Mapping[str, int],
        *,
        follower: bool,
    ) -> None:
        pass

    def isr_changed(self, shrinks: int, expands: int) -> None:
        pass

    def replication_throttled(self, side: str, size_bytes: int, held: int) -> None:
        pass

    def refresh(self, partitions: Iterable[HostedView]) -> None:
        pass


NO_METRICS = NoBrokerMetrics()


class BrokerMetrics(NoBrokerMetrics):
    """The instruments of one broker process (see the module docstring)."""

    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or metrics.meter()
        self._records_in = CounterTable(
            "samsa_broker_records_in", "records appended by produce", ["topic"]
        )
        self._records_out = CounterTable(
            "samsa_broker_records_out",
            "records sent in fetch answers, counted as offsets from each fetch's offset "
            "(aborted records and transaction markers included)",
            IO_LABELS,
        )
        self._io = CounterTable(
            "samsa_broker_io_bytes",
            "record batch bytes produced in and fetched out, per topic",
            IO_LABELS,
        )
        self._topic_tables = (self._records_in, self._records_out, self._io)
        self.topic_series = LabelledSeries(*self._topic_tables)
        self._isr_shrinks = meter.create_counter(
            "samsa.broker.isr.shrinks", description="accepted ISR shrinks of led partitions"
        )
        self._isr_expands = meter.create_counter(
            "samsa.broker.isr.expands", description="accepted ISR expansions of led partitions"
        )
        self._throttled_bytes = meter.create_counter(
            "samsa.broker.replication.throttled.bytes",
            description="bytes moved for throttled replicas (KIP-73), side=leader|follower",
        )
        self._throttle_events = meter.create_counter(
            "samsa.broker.replication.throttle.events",
            description="times a throttled replica's data was held back (quota used up)",
        )
        self.gauges = BrokerGauges()
        gauge = self._gauge
        meter.create_observable_gauge(
            "samsa.broker.partitions",
            [self._observe_partitions],
            unit="{partition}",
            description="partitions hosted here, by role",
        )
        meter.create_observable_gauge(
            "samsa.broker.partitions.under_replicated",
            [gauge(lambda g: g.under_replicated)],
            unit="{partition}",
            description="partitions led here whose ISR is smaller than their replica set",
        )
        meter.create_observable_gauge(
            "samsa.broker.partitions.under_min_isr",
            [gauge(lambda g: g.under_min_isr)],
            unit="{partition}",
            description="partitions led here whose ISR is smaller than min.insync.replicas",
        )
        meter.create_observable_gauge(
            "samsa.broker.producer_ids",
            [gauge(lambda g: g.producer_ids)],
            unit="{producer}",
            description="entries of the producer state tables of the hosted replicas",
        )

    # --- the request path -------------------------------------------------------------------

    def produced(self, topic: str, record_count: int, size_bytes: int) -> None:
        self._records_in.add((topic,), record_count)
        self._io.add((topic, "in", "producer"), size_bytes)

    def fetched(
        self,
        bytes_by_topic: Mapping[str, int],
        records_by_topic: Mapping[str, int],
        *,
        follower: bool,
    ) -> None:
        peer = "follower" if follower else "consumer"
        for topic, size_bytes in bytes_by_topic.items():
            self._io.add((topic, "out", peer), size_bytes)
        for topic, count in records_by_topic.items():
            self._records_out.add((topic, "out", peer), count)

    def replication_throttled(self, side: str, size_bytes: int, held: int) -> None:
        if size_bytes:
            self._throttled_bytes.add(size_bytes, {"side": side})
        if held:
            self._throttle_events.add(held, {"side": side})

    def isr_changed(self, shrinks: int, expands: int) -> None:
        if shrinks:
            self._isr_shrinks.add(shrinks)
        if expands:
            self._isr_expands.add(expands)

    # --- gauges -----------------------------------------------------------------------------

    def refresh(self, partitions: Iterable[HostedView]) -> None:
        """Recompute the gauges (on the event loop); the exporter reads the frozen result. The
        per-topic series of topics no partition here belongs to any more (deleted, or moved
        to other brokers) end, as Kafka removes a topic's metrics when it leaves a broker."""
        hosted = list(partitions)
        self.gauges = broker_gauges(hosted)
        topics = {partition.topic for partition in hosted}
        for table in self._topic_tables:
            table.forget(lambda labels: labels[0] not in topics)

    def _observe_partitions(self, options: CallbackOptions) -> list[Observation]:
        gauges = self.gauges
        return [
            Observation(gauges.partitions_led, {"role": "leader"}),
            Observation(gauges.partitions_followed, {"role": "follower"}),
        ]

    def _gauge(
        self, read: Callable[[BrokerGauges], int]
    ) -> Callable[[CallbackOptions], list[Observation]]:
        def observe(options: CallbackOptions) -> list[Observation]:
            return [Observation(read(self.gauges))]

        return observe


def for_broker() -> NoBrokerMetrics:
    """The broker's instruments when metrics are on, else the no-op NO_METRICS."""
    if not metrics.enabled():
        return NO_METRICS
    instruments = BrokerMetrics()
    metrics.register_collector(instruments.topic_series)
    return instruments

"""The broker's instruments: what a Kafka operator watches on a broker, as OpenTelemetry metrics.

Counters (added on the request path, once per batch and partition, never per record; the
attribute dicts are cached per topic so an add allocates nothing):
- `samsa.broker.records.in` {topic}: records appended by produce (Kafka's MessagesInPerSec); a
  retried batch the log already held adds nothing;
- `samsa.broker.io` (bytes) {topic, direction, peer}: batch bytes appended by producers
  (direction=in, peer=producer: BytesInPerSec) and sent in fetch answers to consumers
  (direction=out, peer=consumer: BytesOutPerSec) and to followers (direction=out, peer=follower:
  ReplicationBytesOutPerSec). Bytes out are counted once per answer sent, from the stored bytes
  read (a long-poll pass that is read again later is not counted twice);
- `samsa.broker.isr.shrinks` / `samsa.broker.isr.expands`: ISR changes this broker proposed as
  leader and the controller accepted (IsrShrinksPerSec / IsrExpandsPerSec).

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

Attributes = dict[str, str]


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

    def refresh(self, partitions: Iterable[HostedView]) -> None:
        pass


NO_METRICS = NoBrokerMetrics()


class BrokerMetrics(NoBrokerMetrics):
    """The instruments of one broker process (see the module docstring)."""

    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or metrics.meter()
        self._records_in = meter.create_counter(
            "samsa.broker.records.in", unit="{record}", description="records appended by produce"
        )
        self._records_out = meter.create_counter(
            "samsa.broker.records.out",
            unit="{record}",
            description="records sent in fetch answers, counted as offsets from each fetch's "
            "offset (aborted records and transaction markers included)",
        )
        self._io = meter.create_counter(
            "samsa.broker.io",
            unit="By",
            description="record batch bytes produced in and fetched out, per topic",
        )
        self._isr_shrinks = meter.create_counter(
            "samsa.broker.isr.shrinks", description="accepted ISR shrinks of led partitions"
        )
        self._isr_expands = meter.create_counter(
            "samsa.broker.isr.expands", description="accepted ISR expansions of led partitions"
        )
        self.gauges = BrokerGauges()
        self._record_attributes: dict[str, Attributes] = {}
        self._io_attributes: dict[tuple[str, bool | None], Attributes] = {}
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
        attributes = self._record_attributes.get(topic)
        if attributes is None:
            attributes = self._record_attributes[topic] = {"topic": topic}
        self._records_in.add(record_count, attributes)
        self._io.add(size_bytes, self._io_attributes_of(topic, None))

    def fetched(
        self,
        bytes_by_topic: Mapping[str, int],
        records_by_topic: Mapping[str, int],
        *,
        follower: bool,
    ) -> None:
        for topic, size_bytes in bytes_by_topic.items():
            self._io.add(size_bytes, self._io_attributes_of(topic, follower))
        for topic, count in records_by_topic.items():
            self._records_out.add(count, self._io_attributes_of(topic, follower))

    def _io_attributes_of(self, topic: str, follower: bool | None) -> Attributes:
        """The io counter's attributes (follower None: produced in), cached per topic."""
        key = (topic, follower)
        attributes = self._io_attributes.get(key)
        if attributes is None:
            peer = "producer" if follower is None else "follower" if follower else "consumer"
            direction = "in" if follower is None else "out"
            attributes = {"topic": topic, "direction": direction, "peer": peer}
            self._io_attributes[key] = attributes
        return attributes

    def isr_changed(self, shrinks: int, expands: int) -> None:
        if shrinks:
            self._isr_shrinks.add(shrinks)
        if expands:
            self._isr_expands.add(expands)

    # --- gauges -----------------------------------------------------------------------------

    def refresh(self, partitions: Iterable[HostedView]) -> None:
        """Recompute the gauges (on the event loop); the exporter reads the frozen result."""
        self.gauges = broker_gauges(partitions)

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
    return BrokerMetrics() if metrics.enabled() else NO_METRICS

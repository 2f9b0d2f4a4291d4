"""Series whose label sets come and go (a topic, a group), kept here rather than in OpenTelemetry.

Why not an OpenTelemetry instrument. The SDK keeps an aggregation for every label set an
instrument ever saw, for the life of the process: a synchronous counter keeps exporting a deleted
topic's series for ever, and once an instrument has seen 2,000 label sets (the SDK's cardinality
limit, stale ones included) every new one is folded into a single `otel_metric_overflow="true"`
series with no label at all. So a broker that outlived 700 short-lived topics exported nothing
per topic for the next ones, and a coordinator's consumer lag of any group after the 2,000th
(group, topic, partition) it ever saw was one unlabelled number. Kafka drops a topic's metrics
when the topic leaves the broker; these tables do the same: the owner `forget`s what is gone
(or replaces a gauge's rows whole), and `LabelledSeries` serves what is left to the same
Prometheus endpoint (metrics.register_collector), under the names OpenTelemetry's exporter gave
them.

Threads. The owner adds and forgets on its event loop; the exporter's thread reads at scrape
time from `dict.copy()`, one C call under the GIL, so it sees a consistent table; a counter only
ever grows while its label set lives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

Labels = tuple[str, ...]


class CounterTable:
    """Monotonic counters, one per label set, exported as `<name>_total`."""

    def __init__(self, name: str, documentation: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.label_names = tuple(label_names)
        self._values: dict[Labels, float] = {}

    def add(self, labels: Labels, amount: float) -> None:
        assert amount >= 0, (self.name, amount)
        values = self._values
        values[labels] = values.get(labels, 0) + amount

    def forget(self, gone: Callable[[Labels], bool]) -> None:
        """Drop the label sets `gone` says no longer exist (their series end)."""
        for labels in [labels for labels in self._values if gone(labels)]:
            del self._values[labels]

    def values(self) -> dict[Labels, float]:
        return self._values.copy()

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.label_names)
        for labels, value in self.values().items():
            family.add_metric(labels, value)
        return family


class GaugeTable:
    """Gauges whose rows are replaced whole: a label set missing from the new rows ends."""

    def __init__(self, name: str, documentation: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.label_names = tuple(label_names)
        self._rows: Mapping[Labels, float] = {}

    def replace(self, rows: Mapping[Labels, float]) -> None:
        self._rows = rows  # one assignment: a scrape sees the old rows or the new

    def values(self) -> dict[Labels, float]:
        return dict(self._rows)

    def family(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.label_names)
        for labels, value in self._rows.items():
            family.add_metric(labels, value)
        return family


class LabelledSeries:
    """A prometheus_client collector over tables (metrics.register_collector serves it)."""

    def __init__(self, *tables: CounterTable | GaugeTable) -> None:
        self.tables = tables

    def describe(self) -> list[Metric]:
        return []  # registering must not collect; the names are checked by the tests

    def collect(self) -> Iterator[Metric]:
        for table in self.tables:
            yield table.family()

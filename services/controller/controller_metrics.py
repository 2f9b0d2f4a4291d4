"""The controller's instruments: observable gauges over its committed metadata image.

- `samsa.controller.active` (1/0), `samsa.controller.metadata.offset`;
- `samsa.controller.brokers` {state=fenced|unfenced}, `samsa.controller.topics`,
  `samsa.controller.partitions`, `samsa.controller.partitions.offline`,
  `samsa.controller.coordinators` {state=live|fenced} (cluster-wide: the active controller
  reports them, standbys report 0; see controller_gauges.py).

The exporter calls the callbacks on its own thread. They read `(image, active)` from the driver
as one reference each: a `MetadataImage` is an immutable value that replay replaces, never
mutates, so walking it off the event loop is safe. The gauges are computed once per image and
activity (`_Cached`), however many instruments read them.

With metrics off (`metrics.enabled()` False) `register` creates nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from samsa.metadata.image import MetadataImage
from samsa.services.controller.controller_gauges import ControllerGauges, controller_gauges
from samsa.services.runtime import metrics

Source = Callable[[], tuple[MetadataImage, bool]]
Callback = Callable[[CallbackOptions], list[Observation]]


class _Cached:
    """The gauges of the last (image, active) seen; recomputed when either changes."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.last: tuple[MetadataImage, bool, ControllerGauges] | None = None

    def gauges(self) -> ControllerGauges:
        image, active = self.source()
        last = self.last
        if last is not None and last[0] is image and last[1] == active:
            return last[2]
        gauges = controller_gauges(image, active=active)
        self.last = (image, active, gauges)  # one assignment: a reader sees old or new
        return gauges


def register(source: Source, meter: Meter | None = None) -> None:
    """Create the controller's gauges over `source()` = (committed image, is active)."""
    meter = meter or metrics.meter()
    cached = _Cached(source)

    def gauge(read: Callable[[ControllerGauges], int]) -> list[Callback]:
        def observe(options: CallbackOptions) -> list[Observation]:
            return [Observation(read(cached.gauges()))]

        return [observe]

    def by_state(
        first: str,
        read_first: Callable[[ControllerGauges], int],
        second: str,
        read_second: Callable[[ControllerGauges], int],
    ) -> list[Callback]:
        def observe(options: CallbackOptions) -> list[Observation]:
            gauges = cached.gauges()
            return [
                Observation(read_first(gauges), {"state": first}),
                Observation(read_second(gauges), {"state": second}),
            ]

        return [observe]

    meter.create_observable_gauge(
        "samsa.controller.active",
        gauge(lambda g: g.active),
        description="1 on the active controller, 0 on a standby",
    )
    meter.create_observable_gauge(
        "samsa.controller.metadata.offset",
        gauge(lambda g: g.metadata_offset),
        description="offset of the last metadata record applied here",
    )
    meter.create_observable_gauge(
        "samsa.controller.brokers",
        by_state("fenced", lambda g: g.brokers_fenced, "unfenced", lambda g: g.brokers_unfenced),
        unit="{broker}",
        description="registered brokers by state (active controller only)",
    )
    meter.create_observable_gauge(
        "samsa.controller.topics",
        gauge(lambda g: g.topics),
        unit="{topic}",
        description="topics (active controller only)",
    )
    meter.create_observable_gauge(
        "samsa.controller.partitions",
        gauge(lambda g: g.partitions),
        unit="{partition}",
        description="partitions (active controller only)",
    )
    meter.create_observable_gauge(
        "samsa.controller.partitions.offline",
        gauge(lambda g: g.partitions_offline),
        unit="{partition}",
        description="partitions without a leader (active controller only)",
    )
    meter.create_observable_gauge(
        "samsa.controller.coordinators",
        by_state("live", lambda g: g.coordinators_live, "fenced", lambda g: g.coordinators_fenced),
        unit="{coordinator}",
        description="registered coordinators by state (active controller only)",
    )


def register_if_enabled(source: Source) -> None:
    """`register` when metrics are on; nothing at all when they are off."""
    if metrics.enabled():
        register(source)

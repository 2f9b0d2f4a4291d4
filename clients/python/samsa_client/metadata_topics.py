"""Which topics a client's metadata describes, and when it forgets one (Kafka's
Metadata.retainTopic, as ProducerMetadata and ConsumerMetadata define it).

Theory of operation. A refresh (cluster_metadata.py) describes `to_describe(...)`, and the view it
swaps in holds those topics only: a topic forgotten is gone from the requests and from the view,
and one used again is simply described again. A topic is described while

- the client keeps it (`kept`, given at each refresh): a consumer's assignment, as Kafka's
  consumer keeps its subscription; a producer's topics with a batch queued or in flight, which
  are not idle however long ago they were drained (a retry keeps its topic's id);
- a call works with it (`hold` ... `release`: from the call's refresh to its last read of the
  view), so that a refresh on another thread meanwhile does not drop it from under the call:
  Kafka's consumer's transient topics (offsetsForTimes and the like), the admin's lookups;
- it was used within `idle_ms`: asked for by a refresh, or marked used (`use`: the producer's
  drain, once per drain, never per record). `idle_ms` is the producer's `metadata.max.idle.ms`
  (Kafka's ProducerMetadata, 5 minutes by default); 0 for the other clients, which forget a topic
  at the first refresh that does not ask for it (Kafka's consumer).

Invariant: the topics remembered as used are those used within `idle_ms` of the last
`to_describe`, so what a refresh asks is bounded by what the client uses, never by what it ever
used. Pure: no I/O, no clock (`now_ms` comes in, monotonic), no lock (ClusterMetadata holds its
own around every call).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

# Kafka's metadata.max.idle.ms default (ProducerConfig): a producer forgets a topic it has not
# used for 5 minutes.
METADATA_MAX_IDLE_MS = 300_000


class MetadataTopics:
    """The topics a client uses (see the module doc)."""

    def __init__(self, idle_ms: int = 0) -> None:
        assert idle_ms >= 0, idle_ms
        self.idle_ms = idle_ms
        self._used_ms: dict[str, int] = {}  # topic -> when it was last used
        self._held: Counter[str] = Counter()  # topic -> calls working with it now

    def use(self, topics: Iterable[str], now_ms: int) -> None:
        """These topics were used at `now_ms` (remembered for `idle_ms` from then)."""
        used_ms = self._used_ms
        for topic in topics:
            if used_ms.get(topic, now_ms) <= now_ms:  # never back in time
                used_ms[topic] = now_ms

    def hold(self, topics: Iterable[str]) -> None:
        """A call works with these topics until `release` (with the same topics)."""
        self._held.update(topics)

    def release(self, topics: Iterable[str]) -> None:
        held = self._held
        for topic in topics:
            assert held[topic] > 0, f"{topic!r} released more often than held"
            held[topic] -= 1
            if held[topic] == 0:
                del held[topic]

    def to_describe(self, asked: Iterable[str], kept: Iterable[str], now_ms: int) -> list[str]:
        """The topics a refresh at `now_ms` describes, sorted: those `asked` (now used), `kept`,
        held, and used within `idle_ms`. Those idle longer are forgotten."""
        asked = set(asked)
        self.use(asked, now_ms)
        expired_ms = now_ms - self.idle_ms  # used at or before it: idle for idle_ms
        self._used_ms = {t: at for t, at in self._used_ms.items() if at > expired_ms or t in asked}
        return sorted(self._used_ms.keys() | self._held.keys() | set(kept))

    @property
    def used(self) -> frozenset[str]:
        """The topics remembered as used (for tests)."""
        return frozenset(self._used_ms)

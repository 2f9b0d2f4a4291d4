"""Client quotas on a broker (KIP-13, KIP-55, KIP-219): byte rates per user and client.id, and
the throttle time they give a request.

Theory of operation. Each broker holds every client to its quotas on its own, from its replica of
the metadata log (metadata/client_quotas.py: the most specific entity with a value for the key,
of Kafka's eight, and the bucket it counts: the user's, the client.id's or the pair's bytes).
Per (bucket, key) it counts bytes in Kafka's sampled windows:
WINDOW_COUNT samples of WINDOW_MS each (quota.window.num 11, quota.window.size.seconds 1). A
request's bytes go into the newest sample (a new one starts when the newest is WINDOW_MS old);
samples older than the whole window are dropped. The observed rate is their total over the span
they cover, and a client over its quota is throttled for Kafka's

    throttle = (observed - quota) / quota * span

which is how long the client must stay silent for its rate over the grown span to come back to
the quota, capped at THROTTLE_MS_MAX (the whole window, as Kafka caps it). One deviation from
Kafka: the span is the time since the oldest kept sample began plus one window (the current one
counted whole); Kafka counts at least WINDOW_COUNT - 1 whole windows even for a client just seen,
which lets a new client send ten seconds of its quota at once before it is held to it. Here a
new client bursts at most one window's worth.

Which requests count: Produce counts the request's batch bytes once appended (producer_byte_rate),
Fetch the answer's record bytes (consumer_byte_rate). Followers (replica_id) and cluster members
writing or reading the internal topics (the coordinators) are exempt: throttling them would
throttle replication and every group's and transaction's state. The adapters delay a throttled
answer by the throttle time with the event loop's timers and set `throttle_time_ms` in it; a
client can then wait before its next request, as KIP-219 asks.

Cost. With no quota in the image the adapters do one check per request (`image.client_quotas`
empty) and none of this runs. Memory: at most limits.quota_tracked_clients_max counts, the least
recently used forgotten first; idle ones are dropped as they are met. Pure: the clock is an
argument.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from samsa.common import limits
from samsa.metadata.client_quotas import CLIENT_ID_METADATA_KEY, Bucket, ClientQuotas, quota_for

# Kafka's quota.window.size.seconds and quota.window.num.
WINDOW_MS = 1000
WINDOW_COUNT = 11
# The longest a request is throttled: the whole window, as Kafka caps it.
THROTTLE_MS_MAX = WINDOW_MS * WINDOW_COUNT

Counted = tuple[Bucket, str]  # (whose bytes, quota key)


class ByteRate:
    """One client's byte counts for one key: [start_ms, bytes] samples, oldest first."""

    __slots__ = ("samples",)

    def __init__(self) -> None:
        self.samples: list[list[int]] = []

    def record(self, size: int, now_ms: int) -> None:
        """Count `size` bytes at `now_ms` (monotonic ms), dropping samples past the window."""
        samples = self.samples
        horizon = now_ms - WINDOW_MS * WINDOW_COUNT
        while samples and samples[0][0] <= horizon:
            samples.pop(0)
        if samples and now_ms - samples[-1][0] < WINDOW_MS:
            samples[-1][1] += size
        else:
            samples.append([now_ms, size])

    def throttle_ms(self, quota: float, now_ms: int) -> int:
        """How long the client must wait for its rate to come back to `quota` (bytes/s)."""
        if not self.samples:
            return 0
        span_ms = now_ms - self.samples[0][0] + WINDOW_MS  # the current window counted whole
        observed = sum(sample[1] for sample in self.samples) * 1000 / span_ms
        if observed <= quota:
            return 0
        return min(int((observed - quota) / quota * span_ms), THROTTLE_MS_MAX)

    def idle(self, now_ms: int) -> bool:
        """Nothing counted within the window: the count can be forgotten."""
        return not self.samples or now_ms - self.samples[-1][0] >= WINDOW_MS * WINDOW_COUNT


class ClientQuotaTracker:
    """The byte rates of the clients a quota applies to, on one broker."""

    def __init__(self, tracked_max: int = limits.quota_tracked_clients_max) -> None:
        assert tracked_max > 0
        self.tracked_max = tracked_max
        self.rates: OrderedDict[Counted, ByteRate] = OrderedDict()  # least recently used first

    def record(
        self,
        quotas: ClientQuotas,
        user: str | None,
        client_id: str | None,
        key: str,
        size: int,
        now_ms: int,
    ) -> int:
        """Count `size` bytes of `key` for the client of `user` with `client_id` and answer its
        throttle time in ms (0: none, or no quota applies to it). `quotas`: the image's."""
        found = quota_for(quotas, user, client_id, key)
        if found is None:
            return 0
        quota, bucket = found
        counted = (bucket, key)
        rate = self.rates.pop(counted, None)
        if rate is None:
            if size == 0:  # nothing to count and nothing owed: no count to keep either
                return 0
            rate = ByteRate()
            self._make_room(now_ms)
        self.rates[counted] = rate  # the most recently used: last
        rate.record(size, now_ms)
        return rate.throttle_ms(quota, now_ms)

    def _make_room(self, now_ms: int) -> None:
        """Forget idle counts from the least recently used end, and the least recently used one
        when the tracker is still full (that client starts a fresh window)."""
        rates = self.rates
        while rates:
            oldest_key = next(iter(rates))
            if not rates[oldest_key].idle(now_ms) and len(rates) < self.tracked_max:
                return
            del rates[oldest_key]


def client_id_from(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The client.id the call's metadata carries (CLIENT_ID_METADATA_KEY), or None when it
    carries none or one over limits.client_id_length_max (counted under the default entity)."""
    for key, value in metadata or ():
        if key == CLIENT_ID_METADATA_KEY:
            if isinstance(value, str) and 0 < len(value) <= limits.client_id_length_max:
                return value
            return None
    return None

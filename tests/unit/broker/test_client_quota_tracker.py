"""Goal: a broker throttles a client exactly as services/broker/quotas.py says: bytes counted
in 11 one-second samples, Kafka's throttle (observed - quota) / quota * span over the span the
samples cover (the current window counted whole), capped at the whole window; the client's own
quota, else the default entity's, else none; counts bounded in number; and the exemption the
adapters apply to the internal topics' bytes.

Method: the pure ByteRate and ClientQuotaTracker on a hand-driven clock (ms), then QuotaThrottle
over a stand-in host whose image holds the quotas.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from samsa.metadata.client_quotas import (
    CLIENT_ID_METADATA_KEY,
    CONSUMER_BYTE_RATE,
    DEFAULT_ENTITY,
    PRODUCER_BYTE_RATE,
)
from samsa.services.broker.quotas import (
    THROTTLE_MS_MAX,
    WINDOW_COUNT,
    WINDOW_MS,
    ByteRate,
    ClientQuotaTracker,
    client_id_from,
)
from samsa.services.broker.requests.fetch_wire import FetchAnswer
from samsa.services.broker.requests.quota_throttle import QuotaThrottle
from samsa.v1 import broker_pb2

QUOTA = 1000.0  # bytes per second
SLOW = {"slow": {PRODUCER_BYTE_RATE: QUOTA}}


def test_within_the_quota_nothing_is_throttled() -> None:
    rate = ByteRate()
    for second in range(20):
        rate.record(1000, second * 1000)
        assert rate.throttle_ms(QUOTA, second * 1000) == 0


def test_the_throttle_is_kafkas_formula_over_the_covered_span() -> None:
    rate = ByteRate()
    rate.record(3000, 0)
    # Span: one window at least; observed 3000 B/s: (3000 - 1000) / 1000 * 1000 ms.
    assert rate.throttle_ms(QUOTA, 0) == 2000
    rate.record(1000, 2500)  # a new sample; span 2.5 s + the current window, 4000 B
    throttle_ms = rate.throttle_ms(QUOTA, 2500)
    assert abs(throttle_ms - (4000 / 3.5 - 1000) / 1000 * 3500) <= 1  # 500 ms
    # Silent for that long: back to the quota.
    assert rate.throttle_ms(QUOTA, 2500 + throttle_ms + 1) == 0


def test_samples_past_the_window_are_forgotten() -> None:
    rate = ByteRate()
    rate.record(50_000, 0)
    assert rate.throttle_ms(QUOTA, 0) == THROTTLE_MS_MAX, "capped at the whole window"
    rate.record(1, WINDOW_MS * WINDOW_COUNT)  # the first sample leaves the window
    assert [sample[0] for sample in rate.samples] == [WINDOW_MS * WINDOW_COUNT]
    assert rate.throttle_ms(QUOTA, WINDOW_MS * WINDOW_COUNT) == 0


def test_requests_within_a_window_share_its_sample() -> None:
    rate = ByteRate()
    for ms in (0, 300, 999):
        rate.record(10, ms)
    rate.record(10, 1000)
    assert rate.samples == [[0, 30], [1000, 10]]


def test_a_client_gets_its_own_quota_else_the_defaults_else_none() -> None:
    tracker = ClientQuotaTracker()
    quotas = {"slow": {PRODUCER_BYTE_RATE: 1000.0}, DEFAULT_ENTITY: {PRODUCER_BYTE_RATE: 5000.0}}
    assert tracker.record(quotas, "slow", PRODUCER_BYTE_RATE, 3000, 0) == 2000
    assert tracker.record(quotas, "other", PRODUCER_BYTE_RATE, 3000, 0) == 0
    assert tracker.record(quotas, None, PRODUCER_BYTE_RATE, 10_000, 0) == 1000
    assert tracker.record(quotas, "slow", CONSUMER_BYTE_RATE, 10**9, 0) == 0, "no such quota"
    assert tracker.record(SLOW, "other", PRODUCER_BYTE_RATE, 10**9, 0) == 0, "no default"
    assert ("other", PRODUCER_BYTE_RATE) not in {
        key for key in ClientQuotaTracker().rates
    }  # nothing kept for a client no quota applies to
    assert set(tracker.rates) == {
        ("slow", PRODUCER_BYTE_RATE),
        ("other", PRODUCER_BYTE_RATE),
        ("", PRODUCER_BYTE_RATE),
    }


def test_counts_are_bounded_least_recently_used_and_idle_first() -> None:
    tracker = ClientQuotaTracker(tracked_max=2)
    quotas = {DEFAULT_ENTITY: {PRODUCER_BYTE_RATE: QUOTA}}
    tracker.record(quotas, "a", PRODUCER_BYTE_RATE, 1, 0)
    tracker.record(quotas, "b", PRODUCER_BYTE_RATE, 1, 0)
    tracker.record(quotas, "a", PRODUCER_BYTE_RATE, 1, 1)  # a: most recently used
    tracker.record(quotas, "c", PRODUCER_BYTE_RATE, 1, 2)
    assert [key[0] for key in tracker.rates] == ["a", "c"]
    later = 2 + WINDOW_MS * WINDOW_COUNT
    tracker.record(quotas, "d", PRODUCER_BYTE_RATE, 1, later)  # a and c idle: both forgotten
    assert [key[0] for key in tracker.rates] == ["d"]


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ((("samsa-client-id", "slow"),), "slow"),
        ((("other", "x"), (CLIENT_ID_METADATA_KEY, "p-1")), "p-1"),
        ((), None),
        (None, None),
        (((CLIENT_ID_METADATA_KEY, ""),), None),
        (((CLIENT_ID_METADATA_KEY, "x" * 256),), None),  # over the limit: the default's
    ],
)
def test_the_client_id_comes_from_the_call_metadata(metadata, expected) -> None:  # type: ignore[no-untyped-def]
    assert client_id_from(metadata) == expected


def _throttle(quotas: dict) -> QuotaThrottle:
    return QuotaThrottle(SimpleNamespace(image=SimpleNamespace(client_quotas=quotas)))  # type: ignore[arg-type]


def test_the_adapters_count_only_the_non_internal_bytes() -> None:
    throttle = _throttle({DEFAULT_ENTITY: {PRODUCER_BYTE_RATE: 1.0, CONSUMER_BYTE_RATE: 1.0}})
    assert throttle.active()
    internal = broker_pb2.ProduceRequest()
    internal.topics.add(name="__consumer_offsets").partitions.add(records=b"x" * 5000)
    assert throttle.produced(None, internal) == 0, "a coordinator's write: exempt"
    produce = broker_pb2.ProduceRequest()
    produce.topics.add(name="t").partitions.add(records=b"x" * 5000)
    assert throttle.produced("p", produce) > 0
    answer = FetchAnswer(broker_pb2.FetchResponse(), {("__transaction_state", 0): b"x" * 5000})
    assert throttle.fetched("c", answer) == 0 and answer.response.throttle_time_ms == 0
    answer = FetchAnswer(broker_pb2.FetchResponse(), {("t", 0): b"x" * 5000})
    throttle_ms = throttle.fetched("c", answer)
    assert throttle_ms > 0 and answer.response.throttle_time_ms == throttle_ms


def test_without_quotas_the_adapters_do_nothing() -> None:
    assert not _throttle({}).active()

"""Goal: a broker throttles a client exactly as services/broker/quotas.py says: bytes counted
in 11 one-second samples, Kafka's throttle (observed - quota) / quota * span over the span the
samples cover (the current window counted whole), capped at the whole window; the client's own
quota, else the default entity's, else none; a user quota counting all of the user's clients
together; counts bounded in number; the exemption the adapters apply to the internal topics'
bytes; and the identity the adapters read (the TLS principal's name, ANONYMOUS without one).

Method: the pure ByteRate and ClientQuotaTracker on a hand-driven clock (ms), then QuotaThrottle
over a stand-in host whose image holds the quotas.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from samsa.metadata.client_quotas import (
    CLIENT_ID_METADATA_KEY,
    CONSUMER_BYTE_RATE,
    DEFAULT,
    DEFAULT_CLIENT,
    PRODUCER_BYTE_RATE,
    Bucket,
    QuotaEntity,
)
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.broker.quotas import (
    THROTTLE_MS_MAX,
    WINDOW_COUNT,
    WINDOW_MS,
    ByteRate,
    ClientQuotaTracker,
    client_id_from,
)
from samsa.services.broker.requests.fetch_wire import FetchAnswer
from samsa.services.broker.requests.quota_throttle import Identity, QuotaThrottle
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
    quotas = {
        QuotaEntity(client_id="slow"): {PRODUCER_BYTE_RATE: 1000.0},
        DEFAULT_CLIENT: {PRODUCER_BYTE_RATE: 5000.0},
    }
    assert tracker.record(quotas, "u", "slow", PRODUCER_BYTE_RATE, 3000, 0) == 2000
    assert tracker.record(quotas, "u", "other", PRODUCER_BYTE_RATE, 3000, 0) == 0
    assert tracker.record(quotas, "u", None, PRODUCER_BYTE_RATE, 10_000, 0) == 1000
    assert tracker.record(quotas, "u", "slow", CONSUMER_BYTE_RATE, 10**9, 0) == 0, "no such quota"
    assert tracker.record(SLOW, "u", "other", PRODUCER_BYTE_RATE, 10**9, 0) == 0, "no default"
    assert set(tracker.rates) == {
        (Bucket(None, "slow"), PRODUCER_BYTE_RATE),
        (Bucket(None, "other"), PRODUCER_BYTE_RATE),
        (Bucket(None, ""), PRODUCER_BYTE_RATE),
    }, "nothing kept for a client no quota applies to"


def test_a_user_quota_counts_all_of_the_users_clients_together() -> None:
    tracker = ClientQuotaTracker()
    quotas = {
        QuotaEntity("alice", None): {PRODUCER_BYTE_RATE: 1000.0},
        QuotaEntity(DEFAULT, DEFAULT): {PRODUCER_BYTE_RATE: 1000.0},
    }
    assert tracker.record(quotas, "alice", "a", PRODUCER_BYTE_RATE, 1000, 0) == 0
    assert tracker.record(quotas, "alice", "b", PRODUCER_BYTE_RATE, 1000, 0) == 1000, "shared"
    assert tracker.record(quotas, "bob", "a", PRODUCER_BYTE_RATE, 1000, 0) == 0
    assert tracker.record(quotas, "bob", "b", PRODUCER_BYTE_RATE, 1000, 0) == 0, "one each"
    assert set(tracker.rates) == {
        (Bucket("alice", None), PRODUCER_BYTE_RATE),
        (Bucket("bob", "a"), PRODUCER_BYTE_RATE),
        (Bucket("bob", "b"), PRODUCER_BYTE_RATE),
    }


def test_counts_are_bounded_least_recently_used_and_idle_first() -> None:
    tracker = ClientQuotaTracker(tracked_max=2)
    quotas = {DEFAULT_CLIENT: {PRODUCER_BYTE_RATE: QUOTA}}
    tracker.record(quotas, "u", "a", PRODUCER_BYTE_RATE, 1, 0)
    tracker.record(quotas, "u", "b", PRODUCER_BYTE_RATE, 1, 0)
    tracker.record(quotas, "u", "a", PRODUCER_BYTE_RATE, 1, 1)  # a: most recently used
    tracker.record(quotas, "u", "c", PRODUCER_BYTE_RATE, 1, 2)
    assert [key[0].client_id for key in tracker.rates] == ["a", "c"]
    later = 2 + WINDOW_MS * WINDOW_COUNT
    tracker.record(quotas, "u", "d", PRODUCER_BYTE_RATE, 1, later)  # a and c idle: forgotten
    assert [key[0].client_id for key in tracker.rates] == ["d"]


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
    throttle = _throttle({DEFAULT_CLIENT: {PRODUCER_BYTE_RATE: 1.0, CONSUMER_BYTE_RATE: 1.0}})
    assert throttle.active()
    internal = broker_pb2.ProduceRequest()
    internal.topics.add(name="__consumer_offsets").partitions.add(records=b"x" * 5000)
    assert throttle.produced(Identity("u", None), internal) == 0, "a coordinator's write: exempt"
    produce = broker_pb2.ProduceRequest()
    produce.topics.add(name="t").partitions.add(records=b"x" * 5000)
    assert throttle.produced(Identity("u", "p"), produce) > 0
    answer = FetchAnswer(broker_pb2.FetchResponse(), {("__transaction_state", 0): b"x" * 5000})
    assert throttle.fetched(Identity("u", "c"), answer) == 0
    assert answer.response.throttle_time_ms == 0
    answer = FetchAnswer(broker_pb2.FetchResponse(), {("t", 0): b"x" * 5000})
    throttle_ms = throttle.fetched(Identity("u", "c"), answer)
    assert throttle_ms > 0 and answer.response.throttle_time_ms == throttle_ms


def test_without_quotas_the_adapters_do_nothing() -> None:
    assert not _throttle({}).active()


class _Context:
    """What the adapter reads of a call: its TLS session's auth context and its metadata."""

    def __init__(self, subject: bytes | None, client_id: str | None) -> None:
        self.subject, self.client_id = subject, client_id

    def auth_context(self) -> dict:
        return {} if self.subject is None else {"x509_subject": [self.subject]}

    def invocation_metadata(self) -> tuple:
        return () if self.client_id is None else ((CLIENT_ID_METADATA_KEY, self.client_id),)


def test_the_identity_is_the_principals_name_and_the_client_id() -> None:
    throttle = _throttle({})
    assert throttle.identity(_Context(b"CN=alice,O=samsa", "p-1")) == Identity(
        "CN=alice,O=samsa", "p-1"
    )
    assert throttle.identity(_Context(None, None)) == Identity("ANONYMOUS", None)
    mapped = QuotaThrottle(
        SimpleNamespace(image=None),  # type: ignore[arg-type]
        PrincipalRules.parse("RULE:^CN=([^,]+),.*$/$1/L"),
    )
    assert mapped.identity(_Context(b"CN=Alice,O=samsa", None)).user == "alice"
    strict = QuotaThrottle(SimpleNamespace(image=None), PrincipalRules.parse("RULE:^x$/y/"))  # type: ignore[arg-type]
    assert strict.identity(_Context(b"CN=z", None)).user == "ANONYMOUS", "no rule fits"

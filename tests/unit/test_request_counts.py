"""Goal: every server refuses a request naming too many items by one rule and in one wording
(common/request_counts.py): the limit itself passes, one more is refused, and the entries that
hold the items (topic entries, markers) count against the same limit, empty ones included. The
sites were about 13 hand-written copies, with differing words and two different ways of counting
entries; a copy written anew would drift again.

Method: the pure helpers at and around their boundaries; the counting of entries against the
older rule (the larger of items and entries) over a grid; a few sites' pure checks on requests of
empty entries; and the service sources scanned for a refusal worded by hand.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from samsa.common import limits
from samsa.common.request_counts import too_many, too_many_nested
from samsa.services.broker.requests.txn_markers import markers_refusal
from samsa.services.coordinator.servicer import partitions_problem
from samsa.services.coordinator.transaction_stream import too_many_partitions, txn_offsets_refusal
from samsa.v1 import broker_pb2 as b
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

ROOT = Path(__file__).resolve().parents[2]


def test_the_limit_passes_and_one_more_is_refused_saying_both_numbers() -> None:
    assert too_many(0, "keys", 0) is None
    assert too_many(3, "keys", 3) is None
    assert too_many(4, "keys", 3) == "4 keys in one request; send at most 3"
    assert too_many(4, "keys", 3, " per FindCoordinator") == (
        "4 keys in one request; send at most 3 per FindCoordinator"
    )


def test_entries_count_against_the_same_limit_items_first() -> None:
    assert too_many_nested(3, "partitions", entries=3, limit=3) is None
    assert too_many_nested(4, "partitions", entries=1, limit=3) == (
        "4 partitions in one request; send at most 3"
    )
    assert too_many_nested(0, "partitions", entries=4, limit=3) == (
        "4 topic entries in one request; send at most 3"
    )
    assert too_many_nested(5, "partitions", entries=4, limit=3, suffix="!") == (
        "5 partitions in one request; send at most 3!"
    ), "the items are named first: a client splits by them"
    assert too_many_nested(0, "partitions", entries=4, limit=3, entries_what="markers") == (
        "4 markers in one request; send at most 3"
    )


def test_checking_each_count_refuses_what_the_larger_of_the_two_did() -> None:
    limit = 3
    for items in range(7):
        for entries in range(7):
            refused = too_many_nested(items, "partitions", entries=entries, limit=limit)
            assert (refused is not None) == (max(items, entries) > limit), (items, entries)


def _empty_entries(request_type: type, field: str, count: int):  # type: ignore[no-untyped-def]
    """A request of `count` empty entries in `field`, built from the wire (fast for ~10,000)."""
    number = request_type.DESCRIPTOR.fields_by_name[field].number
    return request_type.FromString(bytes([(number << 3) | 2, 0]) * count)


PARTITIONS_MAX = limits.request_partitions_max
ITEMS_MAX = limits.admin_request_items_max
TOPICS = "topic entries"


@pytest.mark.parametrize(
    ("check", "request_type", "field", "limit", "entries"),
    [
        (partitions_problem, c.OffsetCommitRequest, "topics", PARTITIONS_MAX, TOPICS),
        (partitions_problem, c.OffsetFetchRequest, "topics", PARTITIONS_MAX, TOPICS),
        (partitions_problem, c.OffsetDeleteRequest, "topics", PARTITIONS_MAX, TOPICS),
        (txn_offsets_refusal, x.TxnOffsetCommitRequest, "topics", ITEMS_MAX, TOPICS),
        (too_many_partitions, x.AddPartitionsToTxnRequest, "partitions", ITEMS_MAX, TOPICS),
        (markers_refusal, b.WriteTxnMarkersRequest, "markers", PARTITIONS_MAX, "markers"),
    ],
)
def test_the_sites_count_empty_entries_and_word_the_refusal_alike(  # type: ignore[no-untyped-def]
    check, request_type, field, limit, entries
) -> None:
    assert check(_empty_entries(request_type, field, limit)) is None
    refusal = check(_empty_entries(request_type, field, limit + 1))
    if isinstance(refusal, tuple):  # the pure checks that choose the status too
        assert refusal[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
        refusal = refusal[1]
    assert refusal == f"{limit + 1} {entries} in one request; send at most {limit}"


def test_no_service_words_the_refusal_by_hand() -> None:
    hand_written = [
        str(path.relative_to(ROOT))
        for folder in ("services", "common")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "send at most" in path.read_text(encoding="utf-8")
        and path != ROOT / "common" / "request_counts.py"
    ]
    assert hand_written == [], "word the refusal with common/request_counts.py"


def test_a_marker_of_empty_topic_entries_is_refused() -> None:
    """WriteTxnMarkers counted its markers and their partitions, not the topic entries inside a
    marker: one marker of a million empty entries passed, each looked at on the event loop."""
    marker = _empty_entries(b.WriteTxnMarkersRequest.TransactionMarker, "topics", PARTITIONS_MAX)
    assert markers_refusal(b.WriteTxnMarkersRequest(markers=[marker])) is None
    marker.topics.add(name="t")
    refusal = markers_refusal(b.WriteTxnMarkersRequest(markers=[marker]))
    assert refusal == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"{PARTITIONS_MAX + 1} topic entries in one request; send at most {PARTITIONS_MAX}",
    )

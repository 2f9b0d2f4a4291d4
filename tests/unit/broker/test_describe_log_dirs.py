"""Goal: DescribeLogDirs' core answers what a broker hosts as Kafka's kafka-log-dirs.sh shows it
(one log directory with its disk space, each replica's size and offset lag, is_future false),
narrowed by the topics and partitions named, in pages that never exceed their limit and that
together answer every replica exactly once; and its request check refuses what would make the
answer repeat itself or grow past the request bounds.

Method: `describe_log_dirs` fed hand-built hosted maps and figures (no broker, no disk); the
pages are followed by their cursors as a client does and compared with the whole answer; the
refusals are `log_dirs_refusal`'s on built requests.
"""

from __future__ import annotations

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.services.broker.requests.describe_log_dirs import (
    DiskSpace,
    ReplicaFigures,
    describe_log_dirs,
    offset_lag,
    page_limit,
)
from samsa.services.broker.requests.request_checks import log_dirs_refusal
from samsa.v1 import broker_pb2 as b

HOSTED = {"orders": {2, 0, 1}, "audit": {0}, "zeta": {4, 3}}
DISK = DiskSpace(total_bytes=1000, usable_bytes=400)


def _figures(topic: str, partition: int) -> ReplicaFigures:
    # Distinct sizes, so that a replica answered under another's name shows.
    return ReplicaFigures(len(topic) * 100 + partition, high_watermark=5, log_end_offset=7)


def _request(
    topics: dict[str, list[int]] | None = None, **fields: object
) -> b.DescribeLogDirsRequest:
    wanted = [
        b.DescribeLogDirsRequest.TopicRequest(name=n, partitions=p)
        for n, p in (topics or {}).items()
    ]
    return b.DescribeLogDirsRequest(topics=wanted, **fields)  # type: ignore[arg-type]


def _replicas(answer: b.DescribeLogDirsResponse) -> list[tuple[str, int, int, int]]:
    (log_dir,) = answer.log_dirs
    return [
        (topic.name, p.partition, p.size_bytes, p.offset_lag)
        for topic in log_dir.topics
        for p in topic.partitions
    ]


def test_every_hosted_replica_is_answered_in_order_with_the_disk_space() -> None:
    answer = describe_log_dirs(_request(), HOSTED, _figures, "/data/b1", DISK, 100)
    (log_dir,) = answer.log_dirs
    assert (log_dir.path, log_dir.error_code) == ("/data/b1", ErrorCode.NONE)
    assert (log_dir.total_bytes, log_dir.usable_bytes) == (1000, 400)
    assert _replicas(answer) == [
        ("audit", 0, 500, 0),
        ("orders", 0, 600, 0),
        ("orders", 1, 601, 0),
        ("orders", 2, 602, 0),
        ("zeta", 3, 403, 0),
        ("zeta", 4, 404, 0),
    ]
    assert not any(p.is_future for t in log_dir.topics for p in t.partitions)
    assert not answer.HasField("next_cursor")


def test_offset_lag_is_kafkas_for_a_current_replica() -> None:
    assert offset_lag(high_watermark=5, log_end_offset=7) == 0
    assert offset_lag(high_watermark=9, log_end_offset=7) == 2


def test_topics_and_partitions_named_narrow_the_answer_and_unhosted_ones_are_left_out() -> None:
    request = _request({"orders": [2, 0, 9], "zeta": [], "missing": [0]})
    answer = describe_log_dirs(request, HOSTED, _figures, "/d", DISK, 100)
    assert [(t, p) for t, p, _, _ in _replicas(answer)] == [
        ("orders", 0),
        ("orders", 2),
        ("zeta", 3),
        ("zeta", 4),
    ]


def test_pages_stop_at_their_limit_and_together_answer_everything_once() -> None:
    whole = _replicas(describe_log_dirs(_request(), HOSTED, _figures, "/d", DISK, 100))
    for limit in (1, 2, 4, 5, 6):
        seen: list[tuple[str, int, int, int]] = []
        request = _request(partition_limit=limit)
        while True:
            page = describe_log_dirs(request, HOSTED, _figures, "/d", DISK, limit)
            assert len(_replicas(page)) <= limit
            assert page.log_dirs[0].total_bytes == 1000  # every page carries the figures
            seen += _replicas(page)
            if not page.HasField("next_cursor"):
                break
            request.cursor.CopyFrom(page.next_cursor)
        assert seen == whole, limit


def test_a_page_continues_inside_a_topic_from_its_cursor() -> None:
    request = _request({"orders": []})
    first = describe_log_dirs(request, HOSTED, _figures, "/d", DISK, 2)
    assert (first.next_cursor.topic, first.next_cursor.partition) == ("orders", 2)
    request.cursor.CopyFrom(first.next_cursor)
    rest = describe_log_dirs(request, HOSTED, _figures, "/d", DISK, 2)
    assert [(t, p) for t, p, _, _ in _replicas(rest)] == [("orders", 2)]
    assert not rest.HasField("next_cursor")


def test_an_unreadable_disk_is_the_directorys_storage_error_and_replicas_still_come() -> None:
    answer = describe_log_dirs(_request(), HOSTED, _figures, "/d", "cannot read it: EIO", 100)
    (log_dir,) = answer.log_dirs
    assert log_dir.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log_dir.error_message == "cannot read it: EIO"
    assert (log_dir.total_bytes, log_dir.usable_bytes) == (-1, -1)
    assert len(_replicas(answer)) == 6


def test_the_page_limit_is_the_servers_maximum_unless_asked_lower() -> None:
    most = limits.log_dirs_answer_partitions_max
    assert [page_limit(asked, most) for asked in (0, 5, most, most + 1)] == [most, 5, most, most]


def test_a_request_naming_a_topic_or_partition_twice_is_refused() -> None:
    assert log_dirs_refusal(_request({"orders": [0, 1], "zeta": []})) is None
    assert log_dirs_refusal(_request({"orders": [0, 1, 0]})) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "a partition of orders is named twice: name each partition once",
    )
    twice = b.DescribeLogDirsRequest(
        topics=[b.DescribeLogDirsRequest.TopicRequest(name="orders")] * 2
    )
    assert log_dirs_refusal(twice) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "topic 'orders' is named twice: name each topic once",
    )


def test_a_request_over_the_partition_bound_or_with_negative_fields_is_refused() -> None:
    many = _request({"orders": list(range(limits.request_partitions_max + 1))})
    refusal = log_dirs_refusal(many)
    assert refusal is not None and refusal[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (
        log_dirs_refusal(_request({"orders": list(range(limits.request_partitions_max))})) is None
    )
    for fields in (
        {"partition_limit": -1},
        {"cursor": b.DescribeLogDirsRequest.Cursor(partition=-1)},
    ):
        refusal = log_dirs_refusal(_request(**fields))
        assert refusal is not None and refusal[0] == grpc.StatusCode.INVALID_ARGUMENT

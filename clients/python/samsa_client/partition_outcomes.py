"""Each partition's outcome in a controller's answers to per-partition admin requests
(AlterPartitionReassignments, ElectLeaders), the pure half both share: None when it was done,
else a TopicError whose message names the partition. A partition asked for and left out of
every answer is UNKNOWN_SERVER_ERROR, so that no partition's outcome goes unreported. Requests
and answers are read in order; a partition's first answer counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from samsa.client.errors import KafkaError, TopicError
from samsa.common.errors import ErrorCode

TopicPartition = tuple[str, int]


def partition_outcomes(
    requests: Iterable[Any], answers: Iterable[Any]
) -> dict[TopicPartition, TopicError | None]:
    """Every partition's outcome, by (topic, partition): the answered ones in answer order, then
    those left unanswered. `requests` and `answers` have `partitions` whose items carry `topic`
    and `partition` (and, in answers, `error_code` and `error_message`)."""
    outcomes: dict[TopicPartition, TopicError | None] = {}
    for answer in answers:
        for result in answer.partitions:
            key = (result.topic, result.partition)
            if result.error_code == ErrorCode.NONE:
                outcomes.setdefault(key, None)
            else:
                error = TopicError.of(result.error_code, result.error_message)
                outcomes.setdefault(key, naming(key, error))
    for request in requests:
        for asked in request.partitions:
            key = (asked.topic, asked.partition)
            if key not in outcomes:
                left_out = TopicError(
                    "the controller's answer left it out", ErrorCode.UNKNOWN_SERVER_ERROR
                )
                outcomes[key] = naming(key, left_out)
    return outcomes


def naming(key: TopicPartition, error: KafkaError) -> TopicError:
    """`error` with its partition named in front, unless its message names it already."""
    name = f"{key[0]}-{key[1]}"
    message = str(error)
    return TopicError(message if name in message else f"partition {name}: {message}", error.code)

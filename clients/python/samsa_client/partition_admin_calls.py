"""Admin's partition calls that each partition's leader answers, the I/O half: DeleteRecords
and ListOffsets. Each builds its request per leader and hands it to `ask_leaders`
(leader_calls.py: grouping by leader, retries after a leader moved, one refusal hiding no other
outcome); the pure half of ListOffsets is listed_offsets.py. Admin (admin.py) documents both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samsa.client.cluster_metadata import ClusterMetadata
from samsa.client.coordinator_calls import CoordinatorCalls
from samsa.client.errors import TopicError
from samsa.client.leader_calls import ask_leaders
from samsa.client.listed_offsets import (
    ListedOffset,
    OffsetSpec,
    isolation_of,
    list_offsets_request,
    listed_offset_of,
    offset_spec_of,
)
from samsa.v1 import broker_pb2

PartitionKey = tuple[str, int]
DELETE_WAIT_MS_MAX = 300_000  # what a broker accepts as DeleteRecords' timeout_ms


class PartitionAdminCalls:
    """Admin.delete_records and Admin.list_offsets, at the partitions' leaders."""

    def __init__(self, calls: CoordinatorCalls, metadata: ClusterMetadata) -> None:
        self._calls = calls
        self._metadata = metadata

    def delete_records(self, offsets: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
        """Each partition's low watermark once its records below `offsets` are deleted."""

        def ask(stub: Any, numbers: dict[str, list[int]], timeout_s: float) -> Any:
            # The leader's wait ends before the call's (at most 0.5 s earlier), so its answer
            # (REQUEST_TIMED_OUT, saying where the followers are) still arrives.
            wait_ms = int(max(timeout_s * 0.75, timeout_s - 0.5) * 1000)
            request = broker_pb2.DeleteRecordsRequest(
                topics=[
                    broker_pb2.DeleteRecordsRequest.TopicData(
                        name=topic,
                        partitions=[
                            broker_pb2.DeleteRecordsRequest.PartitionData(
                                partition=number, offset=offsets[(topic, number)]
                            )
                            for number in numbers
                        ],
                    )
                    for topic, numbers in numbers.items()
                ],
                timeout_ms=max(1, min(wait_ms, DELETE_WAIT_MS_MAX)),
            )
            return stub.DeleteRecords(request, timeout=timeout_s)

        answers = ask_leaders(
            self._calls, self._metadata, offsets, ask, TopicError, "deleted records"
        )
        return {key: answer.low_watermark for key, answer in answers.items()}

    def list_offsets(
        self, specs: Mapping[PartitionKey, OffsetSpec], isolation_level: str
    ) -> dict[PartitionKey, ListedOffset]:
        """Each partition's offset for its spec, from its leader."""
        wanted = {key: offset_spec_of(spec) for key, spec in specs.items()}
        isolation = isolation_of(isolation_level)
        metadata = self._metadata

        def ask(stub: Any, numbers: dict[str, list[int]], timeout_s: float) -> Any:
            asked = {(t, p): wanted[(t, p)] for t, ps in numbers.items() for p in ps}
            request = list_offsets_request(asked, isolation, metadata.topic_ids)
            return stub.ListOffsets(request, timeout=timeout_s)

        answers = ask_leaders(
            self._calls, self._metadata, wanted, ask, TopicError, "listed offsets"
        )
        return {key: listed_offset_of(answer) for key, answer in answers.items()}

"""The sync Consumer's lookups of offsets by timestamp and of the log's ends (ListOffsets at
each partition's leader, run on the consumer's loop): Kafka's offsetsForTimes,
beginningOffsets and endOffsets, each bounded by default.api.timeout.ms as Kafka's are (a
KafkaError past it). A base class of the Consumer, apart only to keep consumer.py
short; the state is the Consumer's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from samsa.client.cluster_metadata import TopicPartition
from samsa.client.config import ConsumerConfig
from samsa.client.consumer_loop import LoopCalls
from samsa.client.fetch_state import EARLIEST, LATEST, OffsetAndTimestamp
from samsa.client.listed_offsets import timestamp_specs


class OffsetLookups(LoopCalls):
    """The Consumer's offset lookups (see the module docstring)."""

    config: ConsumerConfig

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset whose timestamp is >= the given one, per partition (None: none);
        ValueError for a negative timestamp."""
        answers = self._list_offsets(timestamp_specs(timestamps))
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, timestamp)
            for tp, (offset, timestamp) in answers.items()
        }

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        answers = self._list_offsets({tp: (EARLIEST, 0) for tp in partitions})
        return {tp: offset for tp, (offset, _) in answers.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        answers = self._list_offsets({tp: (LATEST, 0) for tp in partitions})
        return {tp: offset for tp, (offset, _) in answers.items()}

    def _list_offsets(
        self, wanted: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, tuple[int, int]]:
        self._check_open()
        return self._on_loop(
            self._driver.list_offsets(wanted, self.config.default_api_timeout_ms / 1000)
        )

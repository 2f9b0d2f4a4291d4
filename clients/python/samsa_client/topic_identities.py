"""The topic ids (KIP-516) the consumer's positions belong to: a topic deleted and created again
under the same name is another topic, and offsets read in the old one mean nothing in the new.

Theory of operation. The fetch state (fetch_state.py) hands each new view of the metadata's topic
ids to `recreated` before it plans fetches. The first id seen for an assigned topic is learnt;
a later, different one names the topic's assigned partitions, which the fetch state resets by
`auto.offset.reset` (with `none`, the next poll raises, as for any partition without a
position). Fetches carry the id too (fetch_sessions.py), so a broker still hosting the old topic
answers UNKNOWN_TOPIC_ID rather than its records, and the consumer refreshes its metadata.

The metadata swaps in a whole new dict on each refresh (cluster_metadata.py), so a view already
looked at costs one identity compare per planning; a new assignment is looked at again
(`reassigned`). Pure: no I/O, no clock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class TopicIdentities:
    """The id each assigned topic's positions were taken under (see the module doc)."""

    def __init__(self) -> None:
        self._known: dict[str, bytes] = {}
        self._looked_at: Mapping[str, bytes] | None = None

    def reassigned(self, assigned: Sequence[TopicPartition]) -> None:
        """The assignment changed: forget the topics that left it, look at the next view."""
        topics = {topic for topic, _ in assigned}
        self._known = {t: known for t, known in self._known.items() if t in topics}
        self._looked_at = None

    def recreated(
        self, topic_ids: Mapping[str, bytes], assigned: Sequence[TopicPartition]
    ) -> list[TopicPartition]:
        """The assigned partitions whose topic has another id in `topic_ids` than the one their
        positions were taken under; the new ids are learnt (each change is told once)."""
        if topic_ids is self._looked_at:
            return []
        self._looked_at = topic_ids
        changed: set[str] = set()
        for topic in {topic for topic, _ in assigned}:
            topic_id = topic_ids.get(topic)
            if not topic_id:
                continue  # not in the metadata (yet, or any more): nothing to compare
            known = self._known.get(topic)
            if known is not None and known != topic_id:
                log.warning(
                    "topic %s was deleted and created again (id %s, was %s): its partitions "
                    "start again per auto.offset.reset",
                    topic,
                    topic_id.hex(),
                    known.hex(),
                )
                changed.add(topic)
            self._known[topic] = topic_id
        return [tp for tp in assigned if tp[0] in changed]

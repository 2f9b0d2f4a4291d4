"""Admin's consumer-group methods (Kafka's AdminClient group calls): a base class of Admin
(admin.py), so that admin.py keeps to topics, partitions, the cluster, quotas and transactions.
Each method documents itself and hands the call to the GroupAdminCalls that Admin builds as
`self._groups` (group_admin_calls.py: at the groups' coordinators; group_admin.py: the pure half).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from samsa.client.group_admin import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupError,
    OffsetAndMetadata,
    PartitionLag,
    TopicPartition,
)
from samsa.client.group_admin_calls import GroupAdminCalls


class ConsumerGroupAdmin:
    """Admin's consumer-group methods, at the groups' coordinators."""

    _groups: GroupAdminCalls

    def list_consumer_groups(self, states: Iterable[str] = ()) -> list[ConsumerGroupListing]:
        """Every group of every live coordinator (only those in `states` when given: Kafka's
        names, "Stable", "Empty", …, which the coordinators filter on), sorted by group id.
        ValueError for a state of no such name. A coordinator that does not answer, or is still
        loading partitions, is asked again until request.timeout.ms."""
        return self._groups.list_consumer_groups(states)

    def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> dict[str, ConsumerGroupDescription]:
        """State, epochs, assignor and members of each group; GroupError for the first that
        failed (GROUP_ID_NOT_FOUND for one that does not exist)."""
        return self._groups.describe_consumer_groups(group_ids)

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> None:
        """Delete empty groups and their committed offsets; GroupError for the first that failed
        (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND), the others are deleted — as delete_topics."""
        self._groups.delete_consumer_groups(group_ids)

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        require_stable: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of `partitions`, or all when None; none: left out);
        require_stable waits out open transactions committing them (KIP-447)."""
        return self._groups.list_consumer_group_offsets(group_id, partitions, require_stable)

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, GroupError | None]:
        """Delete the group's committed offsets of `partitions` (Kafka's
        deleteConsumerGroupOffsets, KIP-496): per partition None (deleted, or there was none) or
        the GroupError saying why it stays (GROUP_SUBSCRIBED_TO_TOPIC: a member subscribes to
        its topic). A missing group raises GroupError (GROUP_ID_NOT_FOUND)."""
        return self._groups.delete_consumer_group_offsets(group_id, partitions)

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Commit `offsets` for the group from outside it: allowed only while the group has no
        members (GroupError saying to stop its consumers first otherwise), as in Kafka."""
        self._groups.alter_consumer_group_offsets(group_id, offsets)

    def describe_consumer_group_lag(self, group_id: str) -> list[PartitionLag]:
        """Committed offset, log end offset and lag of every partition the group committed for
        or owns, sorted by topic and partition."""
        return self._groups.describe_consumer_group_lag(group_id)

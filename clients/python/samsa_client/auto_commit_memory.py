"""What auto-commit last committed of each partition, while the partition stays the consumer's.

Kafka's auto-commit commits every consumed position each auto.commit.interval.ms. The group
driver (group_driver.py) leaves out the positions that did not move since its last auto-commit,
so that an idle consumer sends nothing; that is only sound while nobody else can have moved the
group's offset meanwhile, which is while the partition stays assigned. So the memory of a
partition goes as the partition leaves the fetch state (fetch_state.py calls `forget` for
every partition `assign` drops): revoked, lost, left with the group, or unassigned with
assign(). Before, it was kept: a member that left, whose group's offsets were then reset while
the group was empty, rejoined and read back to the position it had auto-committed, and that
position was never committed again. A commit the application makes (commit(), commit_async())
moves the group's offset too, so it is remembered as well (`remember`): otherwise a consumer
that auto-committed 15, sought back and committed 10 by hand, then read on to 15, never
auto-committed 15 again. A commit that fails is forgotten. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

TopicPartition = tuple[str, int]


class AutoCommitMemory:
    """The offset auto-commit last committed (or is committing) per assigned partition."""

    def __init__(self) -> None:
        self._committed: dict[TopicPartition, int] = {}

    def moved(
        self, consumed: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Of these (position, leader epoch) by partition, those whose position is not the
        offset last auto-committed, now remembered as auto-committed."""
        committed = self._committed
        moved = {tp: at for tp, at in consumed.items() if committed.get(tp) != at[0]}
        committed.update((tp, at[0]) for tp, at in moved.items())
        return moved

    def remember(self, committed: Mapping[TopicPartition, int], assigned: Container) -> None:
        """A commit of these offsets began: of the partitions still assigned, the group's offset
        is (about to be) this, whoever committed it."""
        self._committed.update((tp, at) for tp, at in committed.items() if tp in assigned)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Their next auto-commit commits their position whatever it is: they left the
        consumer, or a commit of them failed."""
        for tp in partitions:
            self._committed.pop(tp, None)

"""The invariants of the seeded group simulation (group_simulator.py), checked by it after
every step, at every accepted commit and after its quiet period; numbered as in
test_group_simulation.py."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from samsa.services.coordinator.group_admin import group_state
from samsa.services.coordinator.group_assignment import resolve
from samsa.services.coordinator.group_model import STABLE, ConsumerGroup, Member, pairs
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.v1 import coordinator_pb2 as c

if TYPE_CHECKING:
    from group_simulator import Client


class SimulationChecks:
    """Mixed into GroupSimulation: reads its clients, the coordinator and what was committed."""

    seed: int
    steps: int
    topics: dict[str, int]
    clients: list[Client]
    coordinator: GroupCoordinatorShard
    committed: dict[tuple[str, int], int]
    counts: Counter[str]

    def group(self) -> ConsumerGroup | None:
        raise NotImplementedError

    def members(self) -> dict[str, Member]:
        raise NotImplementedError

    def check_commit(self, client: Client, topic_partition: tuple[str, int]) -> None:
        """Invariant 3: the committer owns the partition now — client-side and in the
        coordinator's state — no other client that is still a member does (a stalled client
        whose member expired may still believe it owns it: that zombie is why commits are
        checked), and the committed offset does not go backwards."""
        assert topic_partition in client.owned, (self.seed, self.steps)
        group = self.group()
        assert group is not None and group.owners.get(topic_partition) == client.member_id, (
            self.seed,
            self.steps,
        )
        members = self.members()
        for other in self.clients:
            if other is client or other.member_id not in members:
                continue
            assert topic_partition not in other.owned, (
                f"seed {self.seed} step {self.steps}: {client.member_id} committed "
                f"{topic_partition} owned by {other.member_id}"
            )
        offset = client.positions[topic_partition]
        assert offset >= self.committed.get(topic_partition, 0), (self.seed, self.steps)
        self.committed[topic_partition] = offset
        self.counts["commit accepted"] += 1

    def check_safety(self) -> None:
        """Invariants 1 and 2 (3 is checked at every accepted commit); a member away at -2 gave
        everything up, so it holds nothing back from a new owner."""
        owners: dict[tuple[str, int], str] = {}
        for member in self.members().values():
            assert member.member_epoch != -2 or not member.pending_revocation, self.seed
            for topic_partition in pairs(member.assigned) | pairs(member.pending_revocation):
                assert topic_partition not in owners, (self.seed, self.steps, topic_partition)
                owners[topic_partition] = member.member_id
        members = self.members()
        holders: dict[tuple[str, int], str] = {}
        for client in self.clients:
            if client.member_id not in members:
                continue
            for topic_partition in client.owned:
                assert topic_partition not in holders, (
                    f"seed {self.seed} step {self.steps}: {topic_partition} owned by "
                    f"{holders.get(topic_partition)} and {client.member_id}"
                )
                holders[topic_partition] = client.member_id

    def check_no_live_member_removed(self, before: set[str]) -> None:
        """Invariant 5: a client that heartbeats on time and follows the protocol (never
        stalled) is never removed by a session or revocation deadline: it revokes within two
        heartbeat intervals of being told, whether or not it resends an unchanged owned set."""
        removed = before - set(self.members())
        for client in self.clients:
            assert client.member_id not in removed or client.ever_stalled, (
                f"seed {self.seed} step {self.steps}: live member {client.member_id} removed"
            )

    def check_liveness(self) -> None:
        """Invariant 4: every partition of every subscribed topic is owned by exactly one live
        client, and every member is STABLE at the assignment epoch."""
        members = self.members()
        assert set(members) == {one.member_id for one in self.clients}, self.seed
        wanted: set[tuple[str, int]] = set()
        for client in self.clients:
            for topic in resolve(client.topic_names, client.topic_regex, self.topics):
                wanted.update((topic, p) for p in range(self.topics.get(topic, 0)))
        owned = [tp for client in self.clients for tp in client.owned]
        assert len(owned) == len(set(owned)), self.seed
        assert set(owned) == wanted, (self.seed, sorted(wanted ^ set(owned)))
        group = self.group()
        if group is not None and members:
            for member in members.values():
                assert member.state == STABLE, (self.seed, member)
                assert member.member_epoch == group.assignment_epoch, (self.seed, member)
            assert group_state(group) == c.CONSUMER_GROUP_STATE_STABLE

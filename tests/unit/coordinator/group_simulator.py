"""A seeded simulation of one consumer group against the pure coordinator core (STYLE habit 11).

One `random.Random(seed)` drives everything: the clock, which simulated client acts, and the
faults. Clients follow coordinator.proto as a thin client would: join with epoch 0, heartbeat
every interval reporting what they own — a strict client, as Kafka's Java one, only when that
changed since it last said or after a lost answer ("unset means unchanged"), a lenient one also
at random — on an answer commit and drop what it no longer lists and adopt what it adds
(starting from the committed offset), commit increasing offsets for what they own, and on
UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH drop everything and rejoin with the same member id.
Faults and events: joins (some answers lost), leaves, static leave (-2) and rejoin under a new
member id or the same one, crashes (silent; the session timeout removes the member), stalls (the
client keeps its partitions and stops heartbeating, then wakes up and tries to commit before it
heartbeats), lost answers, subscription changes, partition count increases, new and deleted
topics (some matching the regex), and coordinator failover (a new shard rebuilt from the encoded
records, timers restarted; half the time from the log as the cleaner leaves it: a prefix compacted
to the newest record of each key, tombstones kept or, past delete.retention.ms, dropped).

Invariants, checked after every step (`check_safety`), and after a quiet period at the end
(`settle` then `check_liveness`): group_simulator_checks.py and test_group_simulation.py.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from group_simulator_checks import SimulationChecks

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_model import ConsumerGroup, GroupConfig, Member
from samsa.services.coordinator.group_records import decode, encode
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.services.coordinator.group_writer import GroupResult
from samsa.v1 import coordinator_pb2 as c

GROUP = "g"
REGEX = r"r\..*"
CONFIG = GroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
CLIENTS_MAX = 6
PARTITIONS_MAX = 8
EVENTS = {
    "heartbeat": 30,
    "commit": 20,
    "join": 6,
    "leave": 2,
    "static_leave": 2,
    "static_rejoin": 3,
    "crash": 2,
    "stall": 2,
    "wake": 4,
    "lost_answer": 6,
    "subscribe": 3,
    "grow_partitions": 2,
    "create_topic": 2,
    "delete_topic": 1,
    "failover": 2,
    "quiet": 5,
}


@dataclass
class Client:
    member_id: str
    instance_id: str
    topic_names: list[str]
    topic_regex: str
    rebalance_timeout_ms: int
    member_epoch: int = 0  # 0: not joined (join next)
    owned: set[tuple[str, int]] = field(default_factory=set)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    stalled: bool = False
    next_heartbeat_ms: int = 0
    owned_reported: bool = False  # the coordinator was told the current `owned`
    strict: bool = True  # reports `owned` only when it changed or after a lost answer
    ever_stalled: bool = False  # its deadlines may have run out while it slept


class GroupSimulation(SimulationChecks):
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.coordinator = GroupCoordinatorShard(CONFIG)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.topics: dict[str, int] = {"t0": 3, "t1": 2, "r.a": 2, "other": 1}
        self.now_ms = 0
        self.clients: list[Client] = []
        self.static_away: list[str] = []  # instance ids whose client left with -2
        self.member_count = 0
        self.committed: dict[tuple[str, int], int] = {}
        self.counts: Counter[str] = Counter()
        self.steps = 0

    # --- plumbing ---------------------------------------------------------------------------

    def keep(self, result: GroupResult):
        self.log.extend(encode(record) for record in result.records)
        return result.response

    def new_client(self, instance_id: str = "") -> Client:
        self.member_count += 1
        names = self.rng.sample(["t0", "t1", "t2"], self.rng.randint(1, 2))
        use_regex = self.rng.random() < 0.3
        return Client(
            member_id=f"m{self.member_count}",
            instance_id=instance_id,
            topic_names=[] if use_regex else sorted(names),
            topic_regex=REGEX if use_regex else "",
            rebalance_timeout_ms=self.rng.choice([3_000, 8_000, 20_000]),
            strict=self.rng.random() < 0.7,
        )

    def subscription(self, client: Client) -> c.ConsumerGroupSubscription:
        return c.ConsumerGroupSubscription(
            topic_names=client.topic_names, topic_regex=client.topic_regex
        )

    def group(self) -> ConsumerGroup | None:
        return self.coordinator.state.groups.get(GROUP)

    def members(self) -> dict[str, Member]:
        group = self.group()
        return {} if group is None else group.members

    # --- the client protocol ----------------------------------------------------------------

    def heartbeat(
        self,
        client: Client,
        lost: bool = False,
        force_owned: bool = False,
        subscription_changed: bool = False,
    ) -> None:
        request = c.ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=client.member_id,
            member_epoch=client.member_epoch,
            group_instance_id=client.instance_id,
        )
        if subscription_changed:
            request.subscription.CopyFrom(self.subscription(client))
        if client.member_epoch == 0:
            request.rebalance_timeout_ms = client.rebalance_timeout_ms
            request.subscription.CopyFrom(self.subscription(client))
            request.owned_partitions.SetInParent()
            assert not client.owned, "a client joins owning nothing"
            client.owned_reported = True
        elif (
            force_owned
            or not client.owned_reported
            or (not client.strict and self.rng.random() < 0.5)
        ):
            request.owned_partitions.SetInParent()
            for topic in sorted({t for t, _ in client.owned}):
                numbers = sorted(p for t, p in client.owned if t == topic)
                request.owned_partitions.topics.add(topic=topic, partitions=numbers)
            client.owned_reported = True
        answer = self.keep(self.coordinator.heartbeat(request, self.now_ms, self.topics))
        client.next_heartbeat_ms = self.now_ms + CONFIG.heartbeat_interval_ms
        if lost:
            client.owned_reported = False  # a failed request: the next one says everything
            return
        if answer.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            client.owned.clear()  # without committing
            client.member_epoch = 0
            return
        if answer.error_code == ErrorCode.UNRELEASED_INSTANCE_ID:
            return  # the old incarnation's session has not run out yet: try again later
        assert answer.error_code == ErrorCode.NONE, (answer, self.seed)
        client.member_epoch = answer.member_epoch
        assigned = {(t.topic, p) for t in answer.assignment.topics for p in t.partitions}
        revoked = client.owned - assigned
        if revoked:
            self.commit(client, revoked)
        added = assigned - client.owned
        if added:
            self.adopt(client, added)
        if revoked or added:
            client.owned = assigned
            client.owned_reported = False

    def adopt(self, client: Client, added: set[tuple[str, int]]) -> None:
        request = c.OffsetFetchRequest(group_id=GROUP)
        for topic in sorted({t for t, _ in added}):
            request.topics.add(topic=topic, partitions=sorted(p for t, p in added if t == topic))
        answer = self.coordinator.fetch_offsets(request)
        for topic in answer.topics:
            for partition in topic.partitions:
                client.positions[(topic.name, partition.partition)] = max(
                    partition.committed_offset, 0
                )

    def commit(self, client: Client, partitions: set[tuple[str, int]]) -> None:
        if not partitions or client.member_epoch <= 0:
            return
        request = c.OffsetCommitRequest(
            group_id=GROUP, member_id=client.member_id, member_epoch=client.member_epoch
        )
        for topic_partition in sorted(partitions):
            client.positions[topic_partition] += self.rng.randint(0, 5)
            topic, partition = topic_partition
            request.topics.add(name=topic).partitions.add(
                partition=partition, committed_offset=client.positions[topic_partition]
            )
        answer = self.keep(self.coordinator.commit_offsets(request, self.now_ms, self.topics))
        for topic in answer.topics:
            for result in topic.partitions:
                topic_partition = (topic.name, result.partition)
                if result.error_code == ErrorCode.NONE:
                    self.check_commit(client, topic_partition)
                else:
                    assert result.error_code in (
                        ErrorCode.STALE_MEMBER_EPOCH,
                        ErrorCode.FENCED_MEMBER_EPOCH,
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # deleted meanwhile
                    ), (result, self.seed)
                    self.counts["commit refused"] += 1

    # --- events -----------------------------------------------------------------------------

    def step(self) -> None:
        self.steps += 1
        self.now_ms += self.rng.randint(0, 600)
        before = set(self.members())
        self.keep(self.coordinator.expire(self.now_ms))
        self.check_no_live_member_removed(before)
        for client in self.rng.sample(self.clients, len(self.clients)):
            if not client.stalled and client.next_heartbeat_ms <= self.now_ms:
                self.heartbeat(client)
        event = self.rng.choices(list(EVENTS), weights=list(EVENTS.values()))[0]
        if getattr(self, f"on_{event}")():
            self.counts[event] += 1
        self.check_safety()

    def live(self) -> list[Client]:
        return [client for client in self.clients if not client.stalled]

    def pick(self, clients: list[Client]) -> Client | None:
        return self.rng.choice(clients) if clients else None

    def on_heartbeat(self) -> bool:
        client = self.pick(self.live())
        if client is not None:
            self.heartbeat(client)
        return client is not None

    def on_commit(self) -> bool:
        client = self.pick([one for one in self.live() if one.owned])
        if client is not None:
            self.commit(client, set(client.owned))
        return client is not None

    def on_join(self) -> bool:
        if len(self.clients) >= CLIENTS_MAX:
            return False
        instance_id = ""
        if self.rng.random() < 0.4:
            used = {one.instance_id for one in self.clients} | set(self.static_away)
            free = [f"s{n}" for n in range(3) if f"s{n}" not in used]
            instance_id = free[0] if free else ""
        client = self.new_client(instance_id)
        self.clients.append(client)
        self.heartbeat(client, lost=self.rng.random() < 0.2)  # lost: it joins again
        return True

    def on_leave(self) -> bool:
        client = self.pick([one for one in self.live() if one.member_epoch > 0])
        if client is None:
            return False
        self.commit(client, set(client.owned))
        self.clients.remove(client)
        client.member_epoch, client.owned = -1, set()
        self.heartbeat(client, lost=True)
        return True

    def on_static_leave(self) -> bool:
        client = self.pick([one for one in self.live() if one.instance_id and one.member_epoch > 0])
        if client is None:
            return False
        self.commit(client, set(client.owned))
        self.clients.remove(client)
        client.member_epoch, client.owned = -2, set()
        self.heartbeat(client, lost=True)
        self.static_away.append(client.instance_id)
        return True

    def on_static_rejoin(self) -> bool:
        if not self.static_away or len(self.clients) >= CLIENTS_MAX:
            return False
        instance_id = self.static_away.pop(0)
        client = self.new_client(instance_id)
        away = [m for m in self.members().values() if m.instance_id == instance_id]
        if away and away[0].member_epoch == -2 and self.rng.random() < 0.5:
            client.member_id = away[0].member_id  # the same consumer, back after its -2
        self.clients.append(client)
        self.heartbeat(client)
        return True

    def on_crash(self) -> bool:
        client = self.pick(self.clients)
        if client is not None:
            self.clients.remove(client)
            if client.instance_id:
                self.static_away.append(client.instance_id)
        return client is not None

    def on_stall(self) -> bool:
        client = self.pick([one for one in self.live() if one.owned])
        if client is not None:
            client.stalled = client.ever_stalled = True
        return client is not None

    def on_wake(self) -> bool:
        client = self.pick([one for one in self.clients if one.stalled])
        if client is None:
            return False
        client.stalled = False
        self.commit(client, set(client.owned))  # a zombie's commit must be refused
        self.heartbeat(client)
        return True

    def on_lost_answer(self) -> bool:
        client = self.pick(self.live())
        if client is not None:
            self.heartbeat(client, lost=True)
        return client is not None

    def on_subscribe(self) -> bool:
        client = self.pick([one for one in self.live() if one.member_epoch > 0])
        if client is None:
            return False
        fresh = self.new_client()
        self.member_count -= 1
        client.topic_names, client.topic_regex = fresh.topic_names, fresh.topic_regex
        self.heartbeat(client, subscription_changed=True)
        return True

    def on_grow_partitions(self) -> bool:
        topic = self.rng.choice(sorted(self.topics))
        if self.topics[topic] >= PARTITIONS_MAX:
            return False
        self.topics[topic] += self.rng.randint(1, 2)
        return True

    def on_create_topic(self) -> bool:
        name = self.rng.choice(["t1", "t2", "r.a", "r.b", "r.c", "x", "__internal"])
        if name in self.topics:
            return False
        self.topics[name] = self.rng.randint(1, 3)
        return True

    def on_delete_topic(self) -> bool:
        """Its owners are asked to give its partitions up; their commits of it are refused."""
        name = self.rng.choice(sorted(self.topics))
        if name == "t0":
            return False
        del self.topics[name]
        return True

    def on_failover(self) -> bool:
        fresh = GroupCoordinatorShard(CONFIG)
        for offset, (key, value) in self.compacted():
            fresh.replay(decode(key, value), offset)
        assert fresh.state == self.coordinator.state, self.seed
        fresh.start_timers(self.now_ms)
        self.coordinator = fresh
        return True

    def compacted(self) -> list[tuple[int, tuple[bytes, bytes | None]]]:
        """The log with its offsets, half the time as log compaction may leave it: in a prefix
        (the cleaned segments) only the newest record of each key there, tombstones too unless
        they are old enough to go. Its own Random, so the run's events stay those of its seed."""
        rng = random.Random(self.seed * 1_000_003 + self.steps)
        if rng.random() < 0.5:
            return list(enumerate(self.log))
        cleaned = rng.randint(0, len(self.log))
        drop_tombstones = rng.random() < 0.5
        newest = {key: offset for offset, (key, _) in enumerate(self.log[:cleaned])}
        kept = [
            (offset, (key, value))
            for offset, (key, value) in enumerate(self.log[:cleaned])
            if newest[key] == offset and not (value is None and drop_tombstones)
        ]
        return kept + list(enumerate(self.log))[cleaned:]

    def on_quiet(self) -> bool:
        return True

    # --- the quiet period -------------------------------------------------------------------

    def settle(self, rounds_max: int = 300) -> int:
        """The quiet period: stalled clients wake, away static instances come back, every client
        heartbeats each interval until a round changes nothing (after every dead session ran
        out). Returns the rounds it took."""
        for client in [one for one in self.clients if one.stalled]:
            client.stalled = False
        while self.static_away and len(self.clients) < CLIENTS_MAX:
            self.on_static_rejoin()
        quiet_since = self.now_ms
        for rounds in range(1, rounds_max + 1):
            self.now_ms += CONFIG.heartbeat_interval_ms
            log_size = len(self.log)
            before = [(one.member_epoch, frozenset(one.owned)) for one in self.clients]
            self.keep(self.coordinator.expire(self.now_ms))
            for client in self.clients:
                self.heartbeat(client, force_owned=True)
            self.check_safety()
            after = [(one.member_epoch, frozenset(one.owned)) for one in self.clients]
            dead_sessions_over = self.now_ms > quiet_since + CONFIG.session_timeout_ms
            if dead_sessions_over and len(self.log) == log_size and before == after:
                return rounds
        raise AssertionError(f"seed {self.seed}: no quiet after {rounds_max} rounds")

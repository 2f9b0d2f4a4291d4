"""A seeded simulation of consumers, each the SDK's real GroupMember and FetchState with the
facades' listener steps (rebalance.begin_step / end_step / abandon_step), against the real group
coordinator core (group_harness.py) — test_client_group_simulation.py runs it and says why.

One `random.Random(seed)` drives the clock, which consumer acts, and the faults. Heartbeats are
messages: a member's `heartbeat_request` goes in flight when due (the group driver's turn); at
each step every message in flight is delivered (the coordinator applies it, the member gets the
answer), kept in flight (delayed), or fails with NETWORK_EXCEPTION — either before it reached the
coordinator or after the coordinator applied it (the answer lost). `trace` keeps the last events.
"""

from __future__ import annotations

import random
import sys
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "coordinator"))

from group_harness import GroupHarness, persistent_view

from samsa.client.config import ConsumerConfig
from samsa.client.fetch_state import FetchState
from samsa.client.group_member import GroupMember, MemberSettings, MemberState, Subscription
from samsa.client.heartbeat_fields import partitions_from_proto
from samsa.client.rebalance import RebalanceStep, abandon_step, begin_step, end_step
from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_model import STABLE, GroupConfig, Member, pairs
from samsa.services.coordinator.group_records import decode, encode
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.v1 import coordinator_pb2 as cp

TopicPartition = tuple[str, int]
CONFIG = GroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
MAX_POLL_MS = 6_000  # also the rebalance timeout, as group_driver.py sets it
CONSUMERS_MAX = 4
PARTITIONS_MAX = 6
TRACE_MAX = 30
SUBSCRIPTIONS = [frozenset({"a"}), frozenset({"a", "b"}), frozenset({"b"})]
EVENTS = {
    "poll": 40,
    "listener_ends": 10,
    "abandon": 2,
    "join": 3,
    "unsubscribe": 2,
    "resubscribe": 3,
    "crash": 1,
    "stall": 3,
    "wake": 4,
    "change_subscription": 2,
    "grow_partitions": 2,
    "failover": 1,
    "pause": 3,
}


class Harness(GroupHarness):
    """group_harness's shard, log and failover. GroupHarness rebuilds a shard from the whole log
    at every call (15 times slower here); a standby replaying the log as it grows
    (`check_replay`, as test_group_simulation.py does) checks the same at every step."""

    def keep(self, result):
        self.log.extend(encode(record) for record in result.records)
        return result


@dataclass
class Consumer:
    """One consumer process: the member, its fetch state, and its application's listener step."""

    member: GroupMember
    state: FetchState
    step: RebalanceStep | None = None  # a listener call begun, not yet returned
    in_flight: cp.ConsumerGroupHeartbeatRequest | None = None
    stalled: bool = False  # the application does not poll (busy with records)
    crashed: bool = False
    held_at_crash: frozenset[TopicPartition] = field(default_factory=frozenset)

    @property
    def member_id(self) -> str:
        return self.member.settings.member_id

    def held(self) -> frozenset[TopicPartition]:
        """What the application fetches or may commit: its fetch state (rebalance.py adds a
        step's assigned partitions when it begins, drops revoked ones when it ends)."""
        return self.held_at_crash if self.crashed else frozenset(self.state.assignment())


class MemberSimulation:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.harness = Harness(topics={"a": 3, "b": 2}, config=CONFIG)
        self.standby = GroupCoordinatorShard(CONFIG)  # replays the log as it grows
        self.replayed = 0
        self.consumers: list[Consumer] = []
        self.count = 0
        self.steps = 0
        self.counts: Counter[str] = Counter()
        self.trace: deque[str] = deque(maxlen=TRACE_MAX)
        self.drop_rate = self.rng.choice([0.02, 0.08, 0.15])
        self.slow_rate = self.rng.choice([0.1, 0.3, 0.5])  # a listener call spans steps
        for _ in range(3):
            self.on_join()

    @property
    def now_ms(self) -> int:
        return self.harness.now_ms

    def note(self, text: str) -> None:
        self.trace.append(f"#{self.steps} t={self.now_ms}: {text}")

    def live(self) -> list[Consumer]:
        return [one for one in self.consumers if not one.crashed]

    def members(self) -> dict[str, Member]:
        group = self.harness.state.groups.get(self.harness.group_id)
        return {} if group is None else group.members

    # --- the group driver: heartbeats as messages ---------------------------------------------

    def send_due_heartbeats(self) -> None:
        for one in self.live():
            one.member.check_poll_interval(self.now_ms)
            request = one.member.heartbeat_request(self.now_ms)
            if request is not None:
                assert one.in_flight is None, "one heartbeat in flight at a time"
                one.in_flight = request
                owned = sorted(partitions_from_proto(request.owned_partitions))
                said = f" owned={owned}" if request.HasField("owned_partitions") else ""
                self.note(f"{one.member_id} sends epoch={request.member_epoch}{said}")

    def carry_messages(self, drop_rate: float, delay_rate: float) -> None:
        for one in self.rng.sample(self.consumers, len(self.consumers)):
            if one.in_flight is None:
                continue
            roll = self.rng.random()
            if roll < delay_rate:
                continue
            if roll < delay_rate + drop_rate / 2:
                self.fail(one, "lost before the coordinator")
            elif roll < delay_rate + drop_rate:
                self.deliver(one, answer_lost=True)
            else:
                self.deliver(one, answer_lost=False)

    def deliver(self, one: Consumer, answer_lost: bool) -> None:
        request, one.in_flight = one.in_flight, None
        assert request is not None
        h = self.harness
        answer = h.keep(h.coordinator.heartbeat(request, self.now_ms, h.topics)).response
        assignment = sorted(partitions_from_proto(answer.assignment))
        fate = " (answer lost)" if answer_lost else " (crashed)" if one.crashed else ""
        self.note(
            f"coordinator answers {one.member_id}: code={answer.error_code} "
            f"epoch={answer.member_epoch} assignment={assignment}{fate}"
        )
        if answer_lost and not one.crashed:
            one.member.on_heartbeat_failed(ErrorCode.NETWORK_EXCEPTION, "lost", self.now_ms)
        elif not one.crashed:
            one.member.on_heartbeat_answer(answer, self.now_ms)

    def fail(self, one: Consumer, why: str) -> None:
        one.in_flight = None
        self.note(f"{one.member_id}'s heartbeat {why}")
        if not one.crashed:
            one.member.on_heartbeat_failed(ErrorCode.NETWORK_EXCEPTION, why, self.now_ms)

    # --- the application: the facade's poll() -------------------------------------------------

    def poll(self, one: Consumer, slow_rate: float) -> None:
        """consumer.poll: on_poll (the poll timer), then every pending listener call, each
        begun and ended as rebalance.py does. A slow one is left running (the application is
        inside it, so no poll meanwhile): the next poll event is that listener returning."""
        if one.step is not None:
            self.end_listener(one)
        member = one.member
        member.on_poll(self.now_ms)
        for _ in range(10):
            step = begin_step(member, one.state, False)
            if step is None:
                break
            self.note(f"{one.member_id} begins {step.callback.kind.value} {step.partitions}")
            one.step = step
            if self.rng.random() < slow_rate:
                return
            self.end_listener(one)

    def end_listener(self, one: Consumer) -> None:
        step, one.step = one.step, None
        assert step is not None
        end_step(one.member, one.state, step, self.now_ms)
        self.note(f"{one.member_id} ends {step.callback.kind.value} -> {one.member.state.value}")

    # --- events -------------------------------------------------------------------------------

    def step(self) -> None:
        """Time passes (now and then past a timeout), the coordinator's timers run, heartbeats
        due are sent and those in flight carried, then one event; the checks run after each."""
        self.steps += 1
        jump = self.rng.random() < 0.05
        self.harness.now_ms += self.rng.randint(2_000, 12_000) if jump else self.rng.randint(0, 500)
        self.harness.keep(self.harness.coordinator.expire(self.now_ms))
        self.forget_removed_crashes()
        self.check_safety()
        self.send_due_heartbeats()
        self.carry_messages(self.drop_rate, delay_rate=0.3)
        self.check_safety()
        event = self.rng.choices(list(EVENTS), weights=list(EVENTS.values()))[0]
        if getattr(self, f"on_{event}")():
            self.counts[event] += 1
        self.send_due_heartbeats()
        self.check_safety()
        self.check_replay()

    def forget_removed_crashes(self) -> None:
        """A crashed process holds nothing, but only once the coordinator removed its member
        may the check forget what it held (till then no one else may be given it)."""
        members = self.members()
        for one in [c for c in self.consumers if c.crashed and c.in_flight is None]:
            if one.member_id not in members:
                self.consumers.remove(one)
                self.note(f"{one.member_id} (crashed) removed by the coordinator")

    def pick(self, candidates: list[Consumer]) -> Consumer | None:
        return self.rng.choice(candidates) if candidates else None

    def awake(self) -> list[Consumer]:
        return [one for one in self.live() if not one.stalled]

    def on_poll(self) -> bool:
        one = self.pick(self.awake())
        if one is not None:
            self.poll(one, self.slow_rate)
        return one is not None

    def on_listener_ends(self) -> bool:
        one = self.pick([c for c in self.live() if c.step is not None])
        if one is not None:
            self.end_listener(one)
        return one is not None

    def on_abandon(self) -> bool:
        """The poll was cancelled (an asyncio task) while its listener ran: the step runs again
        at the next poll (rebalance.abandon_step)."""
        one = self.pick([c for c in self.live() if c.step is not None])
        if one is None:
            return False
        step, one.step = one.step, None
        assert step is not None
        abandon_step(one.member, one.state, step, self.now_ms)
        self.note(f"{one.member_id} abandons {step.callback.kind.value}")
        return True

    def on_join(self) -> bool:
        if len(self.live()) >= CONSUMERS_MAX:
            return False
        self.count += 1
        settings = MemberSettings("g", f"m{self.count}", "", "c", MAX_POLL_MS, MAX_POLL_MS, "", 100)
        config = {"bootstrap.servers": "x:1", "group.id": "g", "enable.auto.commit": False}
        one = Consumer(GroupMember(settings), FetchState(ConsumerConfig.from_dict(config)))
        self.consumers.append(one)
        topics = self.rng.choice(SUBSCRIPTIONS)
        one.member.subscribe(Subscription(topics=topics), self.now_ms)
        one.member.on_poll(self.now_ms)
        self.note(f"{one.member_id} subscribes to {sorted(topics)}")
        return True

    def on_unsubscribe(self) -> bool:
        """consumer.unsubscribe: on the application's thread (no listener running), every step,
        then the fetch state is emptied."""
        subscribed = [c for c in self.awake() if c.step is None and c.member.subscription]
        one = self.pick(subscribed)
        if one is None:
            return False
        one.member.unsubscribe(self.now_ms)
        self.note(f"{one.member_id} unsubscribes")
        self.poll_steps_only(one)
        one.state.assign([])
        return True

    def poll_steps_only(self, one: Consumer) -> None:
        while (step := begin_step(one.member, one.state, False)) is not None:
            self.note(f"{one.member_id} runs {step.callback.kind.value} {step.partitions}")
            end_step(one.member, one.state, step, self.now_ms)

    def on_resubscribe(self) -> bool:
        one = self.pick([c for c in self.awake() if c.member.subscription is None])
        if one is None:
            return False
        topics = self.rng.choice(SUBSCRIPTIONS)
        one.member.subscribe(Subscription(topics=topics), self.now_ms)
        self.note(f"{one.member_id} subscribes again to {sorted(topics)}")
        return True

    def on_change_subscription(self) -> bool:
        one = self.pick([c for c in self.awake() if c.member.subscription is not None])
        if one is None or one.member.state is MemberState.LEAVING:
            return False
        topics = self.rng.choice(SUBSCRIPTIONS)
        one.member.subscribe(Subscription(topics=topics), self.now_ms)
        self.note(f"{one.member_id} changes its subscription to {sorted(topics)}")
        return True

    def on_crash(self) -> bool:
        one = self.pick(self.live())
        if one is None or len(self.live()) <= 1:
            return False
        one.held_at_crash = one.held()
        one.crashed = True
        self.note(f"{one.member_id} crashes holding {sorted(one.held_at_crash)}")
        return True

    def on_stall(self) -> bool:
        return self.set_stalled(self.pick(self.awake()), True, "stops polling")

    def on_wake(self) -> bool:
        return self.set_stalled(self.pick([c for c in self.live() if c.stalled]), False, "polls")

    def set_stalled(self, one: Consumer | None, stalled: bool, what: str) -> bool:
        if one is not None:
            one.stalled = stalled
            self.note(f"{one.member_id}'s application {what}")
        return one is not None

    def on_grow_partitions(self) -> bool:
        topic = self.rng.choice(sorted(self.harness.topics))
        if self.harness.topics[topic] >= PARTITIONS_MAX:
            return False
        self.harness.topics[topic] += 1
        self.note(f"topic {topic} grows to {self.harness.topics[topic]} partitions")
        return True

    def on_failover(self) -> bool:
        self.harness.fail_over()  # asserts the replay of the log equals the live shard
        self.note("coordinator fails over (rebuilt from its records)")
        return True

    def on_pause(self) -> bool:
        return True

    # --- the quiet period ---------------------------------------------------------------------

    def settle(self, rounds_max: int = 200) -> None:
        """Faults stop: applications wake and poll, every heartbeat is delivered at once, time
        advances by 300 ms a round until crashed members are gone and a round changes nothing."""
        for one in self.live():
            one.stalled = False
        quiet_since = self.now_ms
        for _ in range(rounds_max):
            self.steps += 1
            before = self.picture()
            self.harness.now_ms += 300
            self.harness.keep(self.harness.coordinator.expire(self.now_ms))
            self.forget_removed_crashes()
            for one in self.live():
                self.poll(one, slow_rate=0.0)
            for _ in range(3):
                self.send_due_heartbeats()
                self.carry_messages(drop_rate=0.0, delay_rate=0.0)
            self.check_safety()
            crashes_gone = all(not one.crashed for one in self.consumers)
            long_enough = self.now_ms > quiet_since + CONFIG.session_timeout_ms
            if crashes_gone and long_enough and self.picture() == before:
                return
        raise AssertionError(f"no quiet after {rounds_max} rounds")

    def picture(self) -> list[object]:
        return [(c.member_id, c.member.state, c.member.owned, c.held()) for c in self.consumers]

    # --- the checks (test_client_group_simulation.py says why these) ----------------------------

    def check_safety(self) -> None:
        members = self.members()
        owners: dict[TopicPartition, str] = {}
        for member in members.values():
            claimed = pairs(member.assigned) | pairs(member.pending_revocation)
            for tp in claimed:
                assert tp not in owners, f"coordinator: {tp} of {owners[tp]} and {member.member_id}"
                owners[tp] = member.member_id
        holders: dict[TopicPartition, str] = {}
        for one in self.consumers:
            assert one.member.state is not MemberState.FATAL, (one.member_id, one.member.error)
            if one.member_id not in members:
                continue  # a zombie: see the test's module docstring
            for tp in one.held():
                assert tp not in holders, f"{tp} held by {holders[tp]} and {one.member_id}"
                holders[tp] = one.member_id
                assert owners.get(tp) == one.member_id, (
                    f"{one.member_id} holds {tp}, which the coordinator gives to {owners.get(tp)}"
                )

    def check_replay(self) -> None:
        """A standby fed the records as they are written equals the live shard (failover)."""
        log = self.harness.log
        for offset in range(self.replayed, len(log)):
            self.standby.replay(decode(*log[offset]), offset)
        self.replayed = len(log)
        assert persistent_view(self.standby.state) == persistent_view(self.harness.state)

    def check_liveness(self) -> None:
        members = self.members()
        subscribed = [c for c in self.live() if c.member.subscription is not None]
        assert set(members) == {c.member_id for c in subscribed}, (sorted(members), subscribed)
        assert all(member.state == STABLE for member in members.values()), members
        wanted: set[TopicPartition] = set()
        for one in subscribed:
            assert one.member.state is MemberState.STABLE, (one.member_id, one.member.state)
            assert one.held() == one.member.owned == one.member.target, one.member_id
            topics = one.member.subscription.topics if one.member.subscription else frozenset()
            for topic in topics:
                wanted |= {(topic, p) for p in range(self.harness.topics[topic])}
        held = [tp for one in self.live() for tp in one.held()]
        assert len(held) == len(set(held)), sorted(held)
        assert set(held) == wanted, sorted(wanted ^ set(held))

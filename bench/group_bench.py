"""The consumer-group benchmark (issue 12): what subscribe() costs next to assign(), how long a
group takes to settle, and how long partitions stay unread when a member dies or leaves — every
figure beside its baseline or the setting that bounds it, measured in one run.

python -m bench groups            every scenario (under a minute; also part of `all`)
python -m bench groups --quick    a fifth of the records and 2 runs of each kind (consumption,
                                  join, latency), for a smoke run

The cluster: 1 controller, 2 brokers and 2 coordinators from the launcher, `__consumer_offsets`
with 4 partitions, a realistic member session (group.consumer.session.timeout.ms 6000,
heartbeat interval 500 ms); every process is stopped by PID at the end, also on failure. Before
the first table one group joins and leaves (the warm-up: the coordinator lookup and the first
load of a `__consumer_offsets` partition are not counted anywhere).

1. Group consumption beside assign(): one 6-partition topic per record size, pre-produced; one
   consumer reads it all, alternately with assign() of the 6 partitions and subscribe() in a
   fresh group (auto.offset.reset earliest, the SDK's defaults otherwise: auto-commit on), 5
   runs each (--quick: 2) after one untimed assign() read. Each run is timed from its first
   poll() to its last record, so the group's join is inside the rate; "first record ms" is
   subscribe() (or assign()) to the first record; "steady" is the rate after the first batch
   (no join, no connecting). Target: group median records/s at least 90 % of assign()'s. The
   machine is shared: single runs of the same kind differ by up to 2x, read the medians. 400,000
   records of 100 B and 200,000 of 1 KiB make a run last about half a second: with a quarter of
   that (until 2026-12-03) a run was ~18 polls in 0.12-0.2 s, and its rate measured the join and
   the machine's noise more than consumption (1 KiB group/assign 0.75x at 50,000 records, 0.99x
   at 200,000, the same cluster and hour).
2. Join time: 4 consumers (a thread each, subscribe() released together) on a 12-partition
   topic; from the first subscribe() to the last listener call, once every member owns its final
   3 partitions (assignment(), disjoint, all 12) and has for 1.5 s; 3 rounds (--quick: 2), their
   median beside the heartbeat interval: with KIP-848 a member learns of a change on its next
   heartbeat.
3. Failover: 3 member processes (bench/group_member_proc.py) on a 12-partition topic produced
   to steadily (one record per ms, round robin); one close()s (leaves), later another is
   SIGKILLed. From the close() call (or the kill) to every one of its partitions assigned to a
   survivor (on_partitions_assigned) and consumed by one (its first record). A killed member is
   only removed when its session expires: that figure is dominated by the session timeout.
4. Produce→consume latency at one record per ms, 1 partition, p50/p99: a group consumer beside
   an assign() consumer, 3 alternating runs each (--quick: 2), medians (the cluster bench's method,
   client_bench.py; the group consumer first reads a warm-up record, so it has joined).
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from bench.figures import arrival_latencies, percentile
from bench.group_member_proc import FailoverPlan, failover, is_balanced
from bench.group_tables import (
    ASSIGN,
    BROKERS,
    CONSUME_PARTITIONS,
    COORDINATORS,
    GROUP,
    HEARTBEAT_INTERVAL_MS,
    IDLE_S,
    JOIN_MEMBERS,
    SESSION_TIMEOUT_MS,
    SETTLE_S,
    SHARED_PARTITIONS,
    SIZES,
    ConsumeRun,
    Plan,
    consumption_table,
    failover_table,
    join_table,
    join_time_s,
    latency_table,
)
from bench.harness import failure_reason, measure_or_reason, print_tables, running_samsa

T = TypeVar("T")

SETTINGS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "coordinator.session.timeout.ms": "3000",
    "coordinator.heartbeat.interval.ms": "300",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
}

# --- the measurements ------------------------------------------------------------------------


def attempt(function: Callable[[], T]) -> T | str:
    """harness.measure_or_reason for any result: a failure becomes its cell's text."""
    try:
        return function()
    except Exception as error:  # one failed cell must not lose the others
        traceback.print_exc()
        return failure_reason(error)


def fresh_group(name: str) -> str:
    return f"bench-{name}-{uuid.uuid4().hex[:8]}"


def new_consumer(bootstrap: str, group_id: str | None, **settings: object) -> Any:
    from samsa.client import Consumer

    config: dict[str, object] = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}
    return Consumer(config | ({"group.id": group_id} if group_id else {}) | settings)


def recording_listener(on_call: Callable[[], None]) -> Any:
    """A rebalance listener that calls `on_call` on every call it gets."""
    from samsa.client import ConsumerRebalanceListener

    class Recorder(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
            on_call()

        def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
            on_call()

        def on_partitions_lost(self, partitions: list[tuple[str, int]]) -> None:
            on_call()

    return Recorder()


def consume_run(
    bootstrap: str, topic: str, count: int, size: int, group_id: str | None
) -> ConsumeRun:
    consumer = new_consumer(bootstrap, group_id, **{"max.poll.records": 100_000})
    try:
        started = time.perf_counter()
        if group_id:
            consumer.subscribe([topic])
        else:
            consumer.assign([(topic, p) for p in range(CONSUME_PARTITIONS)])
        first_poll = time.perf_counter()
        first_record = last_record = 0.0
        got = first_batch = 0
        while got < count:
            records = consumer.poll(timeout=1.0)
            now = time.perf_counter()
            if records:
                first_record, last_record = first_record or now, now
                first_batch = first_batch or len(records)
                got += len(records)
            elif now - (last_record or first_poll) > IDLE_S:
                raise RuntimeError(f"read {got:,} of {count:,} records, then none for {IDLE_S:g} s")
    finally:
        consumer.close()
    elapsed_s, first_record_s = last_record - first_poll, first_record - started
    return ConsumeRun(got, size, elapsed_s, first_record_s, first_batch, last_record - first_record)


def consumption(bootstrap: str, size: int, plan: Plan) -> str:
    from bench.client_bench import samsa_produce

    topic = f"groups-consume-{size}b"
    count = plan.records[size]
    produced = attempt(lambda: samsa_produce(bootstrap, topic, count, size, "none"))
    if isinstance(produced, str):
        return consumption_table(size, plan, {ASSIGN: [produced], GROUP: [produced]})
    # Untimed: the run's first consumer of a topic connects to its brokers' processes first.
    attempt(lambda: consume_run(bootstrap, topic, count, size, None))
    runs: dict[str, list[ConsumeRun | str]] = {ASSIGN: [], GROUP: []}
    for _ in range(plan.rounds):
        for column in (ASSIGN, GROUP):
            group_id = fresh_group(f"consume-{size}b") if column == GROUP else None
            run = attempt(lambda g=group_id: consume_run(bootstrap, topic, count, size, g))
            runs[column].append(run)
    return consumption_table(size, plan, runs)


class JoinMember:
    """One of the join's consumers, polling on its own thread; what it owns after each poll()."""

    def __init__(self, bootstrap: str, topic: str, barrier: threading.Barrier, group_id: str):
        self.consumer = new_consumer(bootstrap, group_id, **{"fetch.max.wait.ms": 100})
        self.topic, self.barrier = topic, barrier
        self.calls: list[float] = []  # time.monotonic() of each listener call
        self.subscribed_at = 0.0
        self.owned: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        try:
            self.barrier.wait(timeout=60)
            self.subscribed_at = time.monotonic()
            self.consumer.subscribe([self.topic], listener=recording_listener(self.on_call))
            while not self.stopping.is_set():
                self.consumer.poll(timeout=0.05)
                self.owned = frozenset(p for _, p in self.consumer.assignment())
        except BaseException as error:  # read by the bench's thread, which raises it
            self.error = error
        finally:
            self.consumer.close()

    def on_call(self) -> None:
        self.calls.append(time.monotonic())


def join_round(bootstrap: str, topic: str, timeout_s: float = 60.0) -> float:
    """Seconds from the first subscribe() to the last listener call of a settled group."""
    barrier = threading.Barrier(JOIN_MEMBERS)
    group_id = fresh_group("join")
    members = [JoinMember(bootstrap, topic, barrier, group_id) for _ in range(JOIN_MEMBERS)]
    for member in members:
        member.thread.start()
    try:
        deadline, balanced_since = time.monotonic() + timeout_s, None
        while True:
            if errors := [m.error for m in members if m.error is not None]:
                raise errors[0]
            now = time.monotonic()
            if not is_balanced({str(i): m.owned for i, m in enumerate(members)}, SHARED_PARTITIONS):
                balanced_since = None
            elif balanced_since is None:
                balanced_since = now
            elif now - balanced_since >= SETTLE_S:
                settled_at = now
                break
            if now > deadline:
                owned = [sorted(m.owned) for m in members]
                raise RuntimeError(f"not settled after {timeout_s:g} s: owned {owned}")
            time.sleep(0.02)
    finally:
        for member in members:
            member.stopping.set()
        for member in members:
            member.thread.join(timeout=30)
    calls = [call for member in members for call in member.calls]
    return join_time_s(calls, [member.subscribed_at for member in members], settled_at)


def warm_up(bootstrap: str, topic: str, timeout_s: float = 60.0) -> float:
    """The run's first group: seconds from subscribe() until it owns its partition."""
    consumer = new_consumer(bootstrap, fresh_group("warm-up"))
    try:
        started = time.monotonic()
        consumer.subscribe([topic])
        while not consumer.assignment():
            consumer.poll(timeout=0.05)
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"no assignment after {timeout_s:g} s")
        return time.monotonic() - started
    finally:
        consumer.close()


# --- latency ------------------------------------------------------------------------------------


def end_to_end_latency(bootstrap: str, topic: str, n: int, interval_s: float, group: bool) -> dict:
    """One record per `interval_s` to partition 0; a consumer thread stamps each arrival. The
    consumer first reads a warm-up record, so that a group consumer has joined before timing;
    a run that does not read every timed record fails (client_bench's method)."""
    from bench.client_bench import arrive, record_id
    from samsa.client import Producer

    create_topics(bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    consumer = new_consumer(bootstrap, fresh_group("latency") if group else None,
                            **{"fetch.max.wait.ms": 100})  # fmt: skip
    sent_at: dict[bytes, float] = {}
    arrived_at: dict[bytes, float] = {}
    done = threading.Event()
    try:
        if group:
            consumer.subscribe([topic])
        else:
            consumer.assign([(topic, 0)])
        producer.send(topic, bytes(100), partition=0).result(timeout=30)
        deadline = time.monotonic() + 60
        while not consumer.poll(timeout=0.1):
            if time.monotonic() > deadline:
                raise RuntimeError("the warm-up record did not arrive in 60 s")

        def consume() -> None:
            while len(arrived_at) < n and not done.is_set():
                for record in consumer.poll(timeout=0.5):
                    arrive(sent_at, arrived_at, record.value[:8])

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        for index in range(n):
            value = record_id(index) + bytes(92)
            sent_at[value[:8]] = time.perf_counter()
            producer.send(topic, value, partition=0)
            time.sleep(interval_s)
        producer.flush()
        reader.join(timeout=30)
    finally:
        done.set()
        producer.close()
        consumer.close()
    latencies = arrival_latencies(sent_at, arrived_at, n)  # every record read, or no figure
    return {"p50_us": percentile(latencies, 0.5) * 1e6, "p99_us": percentile(latencies, 0.99) * 1e6}


def latency_runs(bootstrap: str, plan: Plan) -> dict[str, list[dict | str]]:
    """assign(), group, assign(), group, …: each on a fresh 1-partition topic (earliest reads
    only the run's own warm-up record)."""
    runs: dict[str, list[dict | str]] = {ASSIGN: [], GROUP: []}
    for index in range(plan.latency_rounds):
        for column in (ASSIGN, GROUP):
            topic = f"groups-latency-{column}-{index + 1}"
            run = measure_or_reason(
                lambda topic=topic, group=column == GROUP: end_to_end_latency(
                    bootstrap, topic, plan.end_to_end_records, plan.interval_s, group
                )
            )
            runs[column].append(run)
    return runs


# --- the run ----------------------------------------------------------------------------------


TOPICS = {f"groups-consume-{size}b": CONSUME_PARTITIONS for size in SIZES} | {
    "groups-join": SHARED_PARTITIONS,
    "groups-failover": SHARED_PARTITIONS,
    "groups-warm-up": 1,
}


def create_topics(bootstrap: str, partitions: Mapping[str, int]) -> None:
    from samsa.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, count, 1) for name, count in partitions.items()])


def run_group_bench(quick: bool = False) -> Iterator[str]:
    """Start the cluster, then yield each table as soon as it is measured; every process
    started is stopped by PID at the end (the ExitStack), whatever happens in between."""
    plan = Plan.for_run(quick)
    with contextlib.ExitStack() as stack:
        try:
            bootstrap = stack.enter_context(
                running_samsa(1, BROKERS, SETTINGS, coordinators=COORDINATORS, name="groups")
            ).spec.bootstrap_servers
            create_topics(bootstrap, TOPICS)
        except Exception as error:  # nothing to measure against
            traceback.print_exc()
            yield f"no cluster, no figures: {failure_reason(error)}"
            return
        warm = attempt(lambda: warm_up(bootstrap, "groups-warm-up"))
        for size in SIZES:
            yield consumption(bootstrap, size, plan)
        joins = [
            attempt(lambda: join_round(bootstrap, "groups-join")) for _ in range(plan.join_rounds)
        ]
        yield join_table(joins, warm)
        failover_plan = FailoverPlan(
            bootstrap, "groups-failover", SHARED_PARTITIONS, SESSION_TIMEOUT_MS, SETTLE_S
        )
        results = attempt(lambda: failover(failover_plan))  # a reason if it could not start
        if isinstance(results, str):
            results = {"kill": results, "leave": results}
        yield failover_table(results)
        yield latency_table(latency_runs(bootstrap, plan), plan)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The group bench has no options of its own: --quick comes with the cluster bench's."""


def run(args: argparse.Namespace) -> None:
    print_tables("Samsa consumer groups", run_group_bench(args.quick), "group benchmark")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench groups",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="a fifth of the records, 2 runs of each kind"
    )
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()

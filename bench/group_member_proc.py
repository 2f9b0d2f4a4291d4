"""The failover scenario of bench/group_bench.py: consumer-group members in processes of their
own (so that the bench can SIGKILL one), the handle the bench drives each by, and the scenario.

python -m bench.group_member_proc BOOTSTRAP TOPIC GROUP_ID      (one member; the bench starts it)

The member subscribes to TOPIC in GROUP_ID (auto.offset.reset earliest, auto-commit on, the
SDK's defaults otherwise) and polls until a line "close" arrives on its stdin; then it close()s
(auto-commit, on_partitions_revoked, the leave heartbeat) and exits. It reports on stdout, one
JSON object a line, `t` read from time.monotonic() — CLOCK_MONOTONIC on Linux, one clock for
every process of the machine, so the bench compares it with its own:

  {"kind": "assigned" | "revoked" | "lost", "t", "partitions"}  a listener call, inside poll()
  {"kind": "assignment", "t", "partitions"}   assignment() after a poll() that changed it
  {"kind": "consumed", "t", "partitions"}     the first records of partitions newly owned
  {"kind": "closing" | "closed", "t"}         around close()
  {"kind": "error", "t", "message"}           poll() or close() raised (the member exits)

"consumed" is reported once per partition and ownership: when a partition is assigned again it
is reported again, so that the bench sees when a survivor first read a partition it took over.

The scenario (`failover`): a steady producer (one record per interval, round robin over the
partitions) and three members; once they share the partitions evenly, one close()s, and the time
from the close() call to every one of its partitions assigned to (on_partitions_assigned) and
first consumed by a survivor is measured; a fourth member joins, the group settles again, and one
member is SIGKILLed: the same two times from the kill. The killed member is removed only when its
session expires (group.consumer.session.timeout.ms), which dominates the second figure.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bench.harness import failure_reason, measure_or_reason

REPO = Path(__file__).resolve().parents[1]
POLL_TIMEOUT_S = 0.05  # how late a listener call or a first record may be seen, at most
FETCH_MAX_WAIT_MS = 100


# --- what the members report (pure) ---------------------------------------------------------


@dataclass(frozen=True)
class MemberEvent:
    """One line a member reported: what, when (time.monotonic()), which partitions."""

    member: str
    kind: str
    t: float
    partitions: tuple[int, ...] = ()


def is_balanced(owned: Mapping[str, Collection[int]], partitions: int) -> bool:
    """Every partition owned by exactly one member, and shares that differ by at most one."""
    shares = [len(share) for share in owned.values()]
    every = [partition for share in owned.values() for partition in share]
    return (
        bool(shares) and sorted(every) == list(range(partitions)) and max(shares) - min(shares) <= 1
    )


def takeover_s(
    events: Iterable[MemberEvent],
    since: float,
    partitions: Collection[int],
    survivors: Collection[str],
    kind: str,
) -> float | None:
    """Seconds from `since` until every one of `partitions` had a `kind` event ("assigned",
    "consumed") at a survivor, or None while one has not."""
    first: dict[int, float] = {}
    for event in events:
        if event.kind != kind or event.member not in survivors or event.t < since:
            continue
        for partition in set(event.partitions) & set(partitions):
            first[partition] = min(first.get(partition, event.t), event.t)
    if not partitions or set(first) != set(partitions):
        return None
    return max(first.values()) - since


def owned_by(events: Iterable[MemberEvent]) -> dict[str, frozenset[int]]:
    """Each member's assignment() as it last reported it."""
    owned: dict[str, frozenset[int]] = {}
    for event in events:
        if event.kind == "assignment":
            owned[event.member] = frozenset(event.partitions)
    return owned


# --- a handle on one member process --------------------------------------------------------


class MemberProcess:
    """A member process and the events it has reported so far (a thread reads its stdout)."""

    def __init__(self, name: str, bootstrap: str, topic: str, group_id: str, log: IO[Any]) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.group_member_proc", bootstrap, topic, group_id],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        self._events: list[MemberEvent] = []
        self._reader = threading.Thread(target=self._read, name=f"{name}-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if not line.startswith("{"):  # not a report (a library printing): not ours to read
                continue
            data = json.loads(line)
            partitions = tuple(data.get("partitions", ()))
            self._events.append(MemberEvent(self.name, data["kind"], data["t"], partitions))

    def events(self) -> list[MemberEvent]:
        return list(self._events)

    def close(self) -> float:
        """Ask the member to close() (leave the group); returns when it was asked."""
        assert self.process.stdin is not None
        asked = time.monotonic()
        self.process.stdin.write("close\n")
        self.process.stdin.flush()
        return asked

    def kill(self) -> float:
        """SIGKILL the member (a crash: no leave heartbeat); returns when the signal was sent."""
        killed = time.monotonic()
        self.process.kill()
        self.process.wait()
        return killed

    def stop(self) -> None:
        """Whatever state it is in, the process is gone afterwards (SIGKILL by PID if needed)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._reader.join(timeout=5)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


# --- the scenario ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailoverPlan:
    """What the scenario needs from the bench: the topic and the group's timing settings."""

    bootstrap: str
    topic: str
    partitions: int
    session_timeout_ms: int
    settle_s: float  # an assignment is final once unchanged this long
    interval_s: float = 0.001  # the steady producer's pace


class SteadyProducer:
    """One 100-byte record per `interval_s`, to each partition in turn, on a thread."""

    def __init__(self, plan: FailoverPlan) -> None:
        from samsa.client import Producer

        config = {"bootstrap.servers": plan.bootstrap, "acks": 1, "linger.ms": 1}
        self.producer = Producer(config)
        self.plan = plan
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.run, name="steady-producer", daemon=True)
        self.thread.start()

    def run(self) -> None:
        index = 0
        try:
            while not self.stopping.is_set():
                partition = index % self.plan.partitions
                self.producer.send(self.plan.topic, bytes(100), partition=partition)
                index += 1
                time.sleep(self.plan.interval_s)
        except BaseException as error:  # raised on the bench's thread by check()
            self.error = error

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"the steady producer failed: {self.error!r}")

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)
        self.producer.close()


class Members:
    """The scenario's member processes, every event they reported, and waiting on them."""

    def __init__(self, plan: FailoverPlan, log_dir: Path, producer: SteadyProducer) -> None:
        self.plan, self.log_dir, self.producer = plan, log_dir, producer
        self.group_id = f"bench-failover-{uuid.uuid4().hex[:8]}"
        self.live: dict[str, MemberProcess] = {}
        self.gone: list[MemberProcess] = []

    def start(self, name: str) -> None:
        with open(self.log_dir / f"{name}.log", "w") as log:  # the child keeps its own copy
            member = MemberProcess(name, self.plan.bootstrap, self.plan.topic, self.group_id, log)
        self.live[name] = member

    def remove(self, name: str) -> MemberProcess:
        member = self.live.pop(name)
        self.gone.append(member)
        return member

    def events(self) -> list[MemberEvent]:
        every = [event for m in [*self.live.values(), *self.gone] for event in m.events()]
        return sorted(every, key=lambda event: event.t)

    def check(self) -> None:
        """Raise when the producer or a live member went away (with the member's stderr)."""
        self.producer.check()
        for name, member in self.live.items():
            errors = [event for event in member.events() if event.kind == "error"]
            if errors or member.process.poll() is not None:
                log = (self.log_dir / f"{name}.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"{name} went away ({errors}); its stderr ends: {log}")

    def wait_balanced(self, timeout_s: float = 60.0) -> None:
        """Until the live members share every partition evenly, unchanged for settle_s."""
        deadline, balanced_since = time.monotonic() + timeout_s, None
        while True:
            self.check()
            reported = owned_by(self.events())
            owned = {name: reported.get(name, frozenset()) for name in self.live}
            now = time.monotonic()
            if not is_balanced(owned, self.plan.partitions):
                balanced_since = None
            elif balanced_since is None:
                balanced_since = now
            elif now - balanced_since >= self.plan.settle_s:
                return
            if now > deadline:
                raise RuntimeError(f"not balanced after {timeout_s:g} s: {owned}")
            time.sleep(0.05)

    def wait_takeover(self, since: float, partitions: frozenset[int], timeout_s: float) -> dict:
        """Until every one of `partitions` was first consumed by a live member; the figures."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.check()
            events, survivors = self.events(), set(self.live)
            consumed = takeover_s(events, since, partitions, survivors, "consumed")
            if consumed is not None:
                assigned = takeover_s(events, since, partitions, survivors, "assigned")
                return {
                    "partitions": float(len(partitions)),
                    "assigned_ms": "n/a (no call)" if assigned is None else assigned * 1000,
                    "consumed_ms": consumed * 1000,
                    "session_ms": float(self.plan.session_timeout_ms),
                }
            if time.monotonic() > deadline:
                raise RuntimeError(f"{sorted(partitions)} not taken over after {timeout_s:g} s")
            time.sleep(0.02)

    def stop(self) -> None:
        for member in [*self.live.values(), *self.gone]:
            member.stop()


def leave(members: Members, name: str) -> dict:
    """Ask `name` to close(): from the asking to its partitions consumed by the others."""
    partitions = owned_by(members.events())[name]
    member = members.remove(name)
    asked = member.close()
    result = members.wait_takeover(asked, partitions, timeout_s=30)
    member.process.wait(timeout=30)
    times = {event.kind: event.t for event in member.events()}
    if "closing" in times and "closed" in times:
        return result | {"close_ms": (times["closed"] - times["closing"]) * 1000}
    return result | {"close_ms": "n/a (no closed)"}


def crash(members: Members, name: str) -> dict:
    """SIGKILL `name`: from the kill to its partitions consumed by the others."""
    partitions = owned_by(members.events())[name]
    killed = members.remove(name).kill()
    timeout_s = members.plan.session_timeout_ms / 1000 + 30
    return members.wait_takeover(killed, partitions, timeout_s) | {"close_ms": "n/a (killed)"}


def failover(plan: FailoverPlan) -> dict[str, dict | str]:
    """The leave, then (a fourth member in, the group settled again) the crash: each one's
    figures, or why there are none. Every process started is SIGKILLed by PID at the end."""
    results: dict[str, dict | str] = {}
    producer = SteadyProducer(plan)
    with tempfile.TemporaryDirectory(prefix="samsa-bench-members-") as log_dir:
        members = Members(plan, Path(log_dir), producer)
        try:
            for name in ("member-1", "member-2", "member-3"):
                members.start(name)
            members.wait_balanced()
            results["leave"] = measure_or_reason(lambda: leave(members, "member-3"))
            members.start("member-4")
            members.wait_balanced()
            results["kill"] = measure_or_reason(lambda: crash(members, "member-1"))
        except Exception as error:  # the figures already measured stand
            traceback.print_exc()
            reason = failure_reason(error)
            results = {"leave": reason, "kill": reason} | results
        finally:
            members.stop()
            producer.stop()
    return results


# --- the member's side ------------------------------------------------------------------------


def emit(kind: str, partitions: object = (), **fields: object) -> None:
    line = {"kind": kind, "t": time.monotonic(), "partitions": sorted(partitions), **fields}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def run_member(bootstrap: str, topic: str, group_id: str) -> None:
    from samsa.client import Consumer, ConsumerRebalanceListener

    fresh: set[int] = set()  # owned partitions whose first record is not yet reported

    class Reporter(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
            emit("assigned", {p for _, p in partitions})
            fresh.update(p for _, p in partitions)

        def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
            emit("revoked", {p for _, p in partitions})

        def on_partitions_lost(self, partitions: list[tuple[str, int]]) -> None:
            emit("lost", {p for _, p in partitions})

    closing = threading.Event()
    threading.Thread(target=lambda: _wait_for_close(closing), daemon=True).start()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": FETCH_MAX_WAIT_MS,
        }
    )
    owned: set[int] = set()
    try:
        consumer.subscribe([topic], listener=Reporter())
        while not closing.is_set():
            records = consumer.poll(timeout=POLL_TIMEOUT_S)
            now_owned = {p for _, p in consumer.assignment()}
            if now_owned != owned:
                fresh.update(now_owned - owned)  # in case a listener call was missed
                owned = now_owned
                emit("assignment", owned)
            first = {record.partition for record in records} & fresh
            if first:
                emit("consumed", first)
                fresh.difference_update(first)
        emit("closing")
        consumer.close()
        emit("closed")
    except Exception as error:  # reported, so that the bench can say why a member went away
        emit("error", message=f"{type(error).__name__}: {error}")
        consumer.close()
        raise


def _wait_for_close(closing: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "close":
            break
    closing.set()  # "close", or the bench went away (stdin closed)


if __name__ == "__main__":
    run_member(*sys.argv[1:4])

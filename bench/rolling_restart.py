"""The replication benchmark's fault scenario: how long an acks=all producer stalls while each
broker of a three-broker, RF=3 cluster is restarted in turn, and whether every record it was told
is stored really is.

Theory of operation. A producer thread sends one small record about every `interval_s` (acks=all,
linger.ms=1, the SDK's defaults otherwise: retries on, delivery.timeout.ms 120 s) and stamps, from
each record's done-callback, the moment its ack arrived. The main thread lets it run steadily for
`settle_s`, then for each broker in turn: SIGTERM (the broker asks the controller to move its
leaderships away — a controlled shutdown — and exits), start the same broker again (same id, ports
and data directory), wait until the partition has a leader and a full ISR again, and let the
producer run steadily for `settle_s`.
Then the producer stops, flushes, and the partition is read back from its start: an acked record
is lost unless its value is at the offset its ack named. A record acked without an offset (a
retried batch its partition's sequences prove written, whose first answer was lost: Kafka's
DUPLICATE_SEQUENCE_NUMBER rule) is lost unless its value is stored at some offset.

The stall is the longest time between two consecutive acks. It is reported per window: "steady"
(before the first restart, the baseline) and one window per broker, from its SIGTERM to the next
broker's (so a leadership moving back to the restarted broker later still falls in its window).
The windows and the comparison of what was acked with what was read are pure functions over
timestamps and dicts (tested in tests/unit/bench/test_rolling_restart.py); the rest is I/O.

The producer is idempotent (the SDK's default with acks=all), so a retried batch the old leader
had in fact appended is recognised and not stored twice; the read-back still counts duplicates
separately from losses, so that a regression shows.
"""

from __future__ import annotations

import itertools
import math
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc

from samsa.client import Admin, Consumer, KafkaError, NewTopic, Producer

if TYPE_CHECKING:
    from samsa.cli.launcher import LocalCluster

ISR_TIMEOUT_S = 60.0  # a restarted broker rejoins the ISR within seconds once it caught up
FLUSH_TIMEOUT_S = 120.0  # the SDK's delivery.timeout.ms: every record is settled by then
READ_BACK_IDLE_S = 30.0  # the read-back gives up after this long without a record


# --- the pure part: windows, gaps, read-back ------------------------------------------------


@dataclass(frozen=True)
class Window:
    """A span of the run the stall is reported for, in perf_counter seconds."""

    label: str
    start_s: float
    end_s: float


def max_ack_gap_ms(ack_times_s: Sequence[float], start_s: float, end_s: float) -> float | None:
    """The longest time between two consecutive acks among the gaps that overlap the window
    [start_s, end_s], in ms; None without a single ack to measure from. A producer that got no
    ack after the window's end (it never recovered) has an open gap: it counts up to `end_s`,
    so that it cannot pass for a short one."""
    ordered = sorted(ack_times_s)
    gaps = [
        later - earlier
        for earlier, later in itertools.pairwise(ordered)
        if later > start_s and earlier < end_s
    ]
    before_end = [moment for moment in ordered if moment < end_s]
    if math.isfinite(end_s) and before_end and before_end[-1] == ordered[-1]:
        gaps.append(end_s - max(before_end[-1], start_s))  # no ack after the window
    return max(gaps) * 1000 if gaps else None


def restart_windows(
    first_ack_s: float, restarts: Sequence[tuple[str, float]], end_s: float
) -> list[Window]:
    """ "steady" from the first ack to the first restart, then one window per restarted broker
    from its SIGTERM to the next one's (the last one to `end_s`)."""
    starts = [moment for _, moment in restarts]
    windows = [Window("steady", first_ack_s, starts[0] if starts else end_s)]
    for index, (label, moment) in enumerate(restarts):
        following = starts[index + 1] if index + 1 < len(starts) else end_s
        windows.append(Window(label, moment, following))
    return windows


@dataclass(frozen=True)
class ReadBack:
    """What reading the partition back found about the acked records."""

    checked: int  # acked records looked for
    lost: int  # acked records whose offset does not hold their value
    duplicated: int  # stored records whose value is stored more than once (retried batches)


def compare_read_back(
    acked: dict[int, bytes], stored: dict[int, bytes], acked_without_offset: Sequence[bytes] = ()
) -> ReadBack:
    """Every acked (offset, value) must be stored as such, and every value acked without an
    offset stored somewhere; duplicates are counted apart."""
    lost = sum(1 for offset, value in acked.items() if stored.get(offset) != value)
    copies = Counter(stored.values())
    lost += sum(1 for value in acked_without_offset if value not in copies)
    duplicated = sum(count - 1 for count in copies.values() if count > 1)
    return ReadBack(len(acked) + len(acked_without_offset), lost, duplicated)


@dataclass
class RollingRestartResult:
    """Everything the scenario measured; `read_back` is None when it could not be checked, and
    `read_back_error` then says why."""

    ack_times_s: list[float] = field(default_factory=list)
    restarts: list[tuple[str, float]] = field(default_factory=list)  # (broker, SIGTERM at)
    back_in_sync_s: dict[str, float] = field(default_factory=dict)  # SIGTERM -> full ISR
    end_s: float = 0.0
    sent: int = 0
    acked: int = 0
    failed: int = 0
    read_back: ReadBack | None = None
    read_back_error: str = ""

    def windows(self) -> list[Window]:
        first = min(self.ack_times_s, default=self.end_s)
        return restart_windows(first, self.restarts, self.end_s)

    def max_gaps_ms(self) -> dict[str, float | None]:
        """The longest gap between acks per window, and the longest of them ("overall")."""
        gaps = {
            window.label: max_ack_gap_ms(self.ack_times_s, window.start_s, window.end_s)
            for window in self.windows()
        }
        measured = [gap for gap in gaps.values() if gap is not None]
        gaps["overall"] = max(measured) if measured else None
        return gaps


# --- the I/O part: topics, ISR, the producer, the restarts ----------------------------------


def create_replicated_topics(
    admin: Admin, topics: Sequence[str], replicas: int, configs: dict[str, str]
) -> None:
    """One partition each, `replicas` copies, `configs` (e.g. min.insync.replicas)."""
    admin.create_topics([NewTopic(topic, 1, replicas, configs) for topic in topics])


def wait_full_isr(admin: Admin, topic: str, replicas: int, timeout_s: float = ISR_TIMEOUT_S) -> int:
    """Block until partition 0 of `topic` has a leader and `replicas` in-sync replicas; returns
    the leader's broker id."""
    deadline = time.monotonic() + timeout_s
    seen = "nothing yet"
    while time.monotonic() < deadline:
        try:
            (partition,) = admin.describe_topics([topic])[topic].partitions
            seen = f"leader {partition.leader}, isr {list(partition.isr)}"
            if partition.leader >= 0 and len(partition.isr) == replicas:
                return partition.leader
        except (KafkaError, grpc.RpcError) as error:
            seen = f"{type(error).__name__}: {error}"
        time.sleep(0.05)
    raise TimeoutError(f"{topic}: no full ISR of {replicas} after {timeout_s:.0f} s ({seen})")


class _SteadyProducer:
    """The producer thread: one record about every `interval_s` until stopped, then a flush;
    ack moments are stamped by the done-callbacks on the SDK's callback thread."""

    def __init__(self, bootstrap: str, topic: str, interval_s: float) -> None:
        self.bootstrap, self.topic, self.interval_s = bootstrap, topic, interval_s
        self.stop = threading.Event()
        self.ack_times_s: list[float] = []
        self.acked: dict[int, bytes] = {}  # offset -> value
        self.acked_without_offset: list[bytes] = []  # RecordMetadata.offset -1
        self.sent = self.failed = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="bench-steady-producer", daemon=True)

    def _on_done(self, future) -> None:
        if future.exception(timeout=0) is None:
            self.ack_times_s.append(time.perf_counter())

    def _run(self) -> None:
        config = {"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 1}
        futures = []
        try:
            with Producer(config) as producer:
                while not self.stop.is_set():
                    value = b"roll-%09d" % len(futures)
                    future = producer.send(self.topic, value, partition=0)
                    future.add_done_callback(self._on_done)
                    futures.append((value, future))
                    time.sleep(self.interval_s)
                producer.flush(timeout=FLUSH_TIMEOUT_S)
        except BaseException as error:  # reported by the main thread, not lost in this one
            self.error = error
        self.sent = len(futures)
        for value, future in futures:
            if future.done() and future.exception(timeout=0) is None:
                offset = future.result(timeout=0).offset
                if offset < 0:  # written, its offset unknown: checked by value
                    self.acked_without_offset.append(value)
                else:
                    self.acked[offset] = value
        self.failed = self.sent - len(self.acked) - len(self.acked_without_offset)


def read_partition(bootstrap: str, topic: str) -> dict[int, bytes]:
    """Partition 0 of `topic` from its start to its end offset: offset -> value."""
    config = {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "max.poll.records": 10_000,
    }
    with Consumer(config) as consumer:
        consumer.assign([(topic, 0)])
        end = consumer.end_offsets([(topic, 0)])[(topic, 0)]
        stored: dict[int, bytes] = {}
        while len(stored) < end:
            records = consumer.poll(timeout=READ_BACK_IDLE_S)
            if not records:
                raise TimeoutError(f"read {len(stored)} of {end} records, then nothing")
            stored.update((record.offset, record.value) for record in records)
    return stored


def run_rolling_restart(
    cluster: LocalCluster, admin: Admin, topic: str, interval_s: float, settle_s: float
) -> RollingRestartResult:
    """Restart every broker in turn under a steady acks=all producer (see the module doc)."""
    replicas = len(cluster.spec.brokers)
    leader = wait_full_isr(admin, topic, replicas)
    result = RollingRestartResult()
    producer = _SteadyProducer(cluster.spec.bootstrap_servers, topic, interval_s)
    producer.thread.start()
    try:
        time.sleep(settle_s)
        for broker in cluster.spec.brokers:
            name = f"broker-{broker.broker_id}"
            label = f"{name} (leader)" if broker.broker_id == leader else name
            stopped_at = time.perf_counter()
            result.restarts.append((label, stopped_at))
            cluster.kill(name, signal.SIGTERM)  # waits for the exit (SIGKILL after a grace)
            cluster.start(name)
            wait_full_isr(admin, topic, replicas)
            result.back_in_sync_s[label] = time.perf_counter() - stopped_at
            time.sleep(settle_s)
            leader = wait_full_isr(admin, topic, replicas)  # it may have moved back meanwhile
    finally:
        result.end_s = time.perf_counter()
        producer.stop.set()
        producer.thread.join(timeout=FLUSH_TIMEOUT_S + 30)
    if producer.error is not None:
        raise producer.error
    result.ack_times_s = producer.ack_times_s
    acked = len(producer.acked) + len(producer.acked_without_offset)
    result.sent, result.acked, result.failed = producer.sent, acked, producer.failed
    try:
        stored = read_partition(cluster.spec.bootstrap_servers, topic)
        result.read_back = compare_read_back(producer.acked, stored, producer.acked_without_offset)
    except (KafkaError, grpc.RpcError, TimeoutError) as error:
        result.read_back_error = f"not checked: {type(error).__name__}: {error}"
    return result

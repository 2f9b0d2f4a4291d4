"""Where one transaction's time goes (issue 13), and what its fixed part allows one producer.

Why. A transaction ends with a chain of round trips that one producer runs one after another
(docs/benchmarks.md, "Why the produce targets are missed"): the flush sends the transaction's
batch, whose leader first adds the partition at the coordinator (which writes `Ongoing` to
`__transaction_state`) and only then appends and answers; then EndTxn, answered once the
coordinator's PrepareCommit is durable. A producer begins its next transaction only after that,
so N / (flush + EndTxn) records/s bounds its rate at N records a transaction even if its send()
calls cost nothing. The table prints that ceiling beside plain produce's best rate of the same
run, and the issue's targets against it: a target above the ceiling needs a shorter chain, not
faster code around it.

How. One warmed transactional producer with transaction_bench.py's settings (acks=all,
idempotent, linger.ms 5, batch.size 256 KiB; 100 B records to partition 0), then per size N,
`transactions` transactions of N records: begin_transaction(), send() each record (timed),
flush() (timed), commit_transaction() (timed: EndTxn, nothing is left to send); the medians.
The flush includes the batch's own produce, which a plain producer pays too (pipelined with its
sends), so the ceiling is a little generous to the transactional producer, never strict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.figures import percentile
from bench.tables import Metric, Table, Target, cell_of, format_targets

SEND_MS = Metric("send_ms", "send() each, p50 ms", False, 2)
FLUSH_MS = Metric("flush_ms", "flush(): produce + add, p50 ms", False, 2)
END_MS = Metric("end_ms", "EndTxn after it, p50 ms", False, 2)
TOTAL_MS = Metric("total_ms", "the transaction, p50 ms", False, 2)
CEILING = Metric("ceiling_per_s", "ceiling records/s", True)
PART_METRICS = (SEND_MS, FLUSH_MS, END_MS, TOTAL_MS)


def parts_of(
    send_s: Sequence[float], flush_s: Sequence[float], end_s: Sequence[float], per_txn: int
) -> dict:
    """Medians in ms of each step (nearest rank, as every figure of the benches), and the
    ceiling N / (flush + EndTxn) in records/s."""
    send, flush, end = (percentile(samples, 0.5) for samples in (send_s, flush_s, end_s))
    totals = [a + b + c for a, b, c in zip(send_s, flush_s, end_s, strict=True)]
    return {
        SEND_MS.key: send * 1000,
        FLUSH_MS.key: flush * 1000,
        END_MS.key: end * 1000,
        TOTAL_MS.key: percentile(totals, 0.5) * 1000,
        CEILING.key: per_txn / (flush + end),
    }


def measure_parts(
    producer: Any,
    topic: str,
    per_txn: int,
    transactions: int,
    values: Sequence[bytes],
    timeout_s: float,
) -> dict:
    """`transactions` transactions of `per_txn` records on a warmed transactional producer,
    each step timed (see the module docstring)."""
    mask = len(values) - 1
    send_s: list[float] = []
    flush_s: list[float] = []
    end_s: list[float] = []
    send = producer.send
    for _ in range(transactions):
        started = time.perf_counter()
        producer.begin_transaction()
        for index in range(per_txn):
            send(topic, values[index & mask], partition=0)
        sent = time.perf_counter()
        producer.flush(timeout_s)
        flushed = time.perf_counter()
        producer.commit_transaction(timeout_s)
        ended = time.perf_counter()
        send_s.append(sent - started)
        flush_s.append(flushed - sent)
        end_s.append(ended - flushed)
    return parts_of(send_s, flush_s, end_s, per_txn)


def parts_runs(
    new_producer: Callable[[], Any],
    topic: str,
    sizes: Mapping[str, int],
    transactions: int,
    values: Sequence[bytes],
    timeout_s: float,
) -> dict[str, dict | str]:
    """One producer (made and warmed by `new_producer`), every size (column name -> records a
    transaction) in turn."""
    producer = new_producer()
    try:
        return {
            name: measure_parts(producer, topic, per_txn, transactions, values, timeout_s)
            for name, per_txn in sizes.items()
        }
    finally:
        producer.close(timeout_s)


def parts_table(
    results: Mapping[str, dict | str],
    plain: dict | str,
    targets: Mapping[str, Target],
    transactions: int,
) -> str:
    """The steps' medians per size; then the ceilings beside plain's best rate, and the
    targets read against the ceilings (pure: figures in, text out)."""
    columns = tuple(results)
    steps = Table(
        f"Where a transaction's time goes: {transactions} transactions of each size on one "
        "producer (begin, send each, flush, commit), medians; ceiling = records a transaction / "
        "(flush + EndTxn), the most one producer can do at that size if send() cost nothing",
        [
            (metric, {name: cell_of(results[name], metric.key) for name in columns})
            for metric in PART_METRICS
        ],
        columns,
        (),
    )
    ceiling_row = {name: cell_of(results[name], CEILING.key) for name in columns}
    ceiling_row["plain"] = cell_of(plain, "records_per_s")
    ceilings = Table("", [(CEILING, ceiling_row)], columns, ("plain",))
    verdicts = "\n".join(
        format_targets(
            f"the target against the ceiling ({name})",
            {CEILING.label: ceiling_row},
            (Target(f"ceiling: {target.label}", CEILING.label, True, target.factor, "plain"),),
            (name,),
        )
        for name, target in targets.items()
        if name in columns
    )
    ceilings_without_title = ceilings.text.split("\n", 1)[1]
    return f"{steps.text}\n{ceilings_without_title}\n\n{verdicts}"

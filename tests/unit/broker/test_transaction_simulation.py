"""Goal: transactions stay all-or-nothing under every interleaving the replication simulation
reaches: no read_committed reader ever sees a record of an aborted or open transaction, a marker
lost with a leader is written again and ends the same transaction, a late or zombie batch (or a
late marker) never lands in a later transaction, and no transaction hangs once the cluster heals.

Method: transaction_sim.py adds a transactional producer, its coordinator's two phases and a
read_committed reader to replication_sim.py's cluster, over the broker's own produce, KIP-890
check, WriteTxnMarkers, producer state, transaction index and read path, and the SDK's decoding
of read_committed answers. A failure names the seed and step; rerun it with `-k "seed_N"`. CI
runs CI_SEEDS (seeds by mode: default, power losses, DeleteRecords, retention, compaction);
SAMSA_SLOW=1 more.

What it found: with DeleteRecords, the last stable offset of a transaction open across the new
log start stayed below it (every seed); and, through a stuck producer in one seed, that a crash
after deleted segments rebuilt the producer state from a snapshot older than the log, skipping
deleted markers (test_log_transactions covers that directly). With the late-marker epoch check
removed, 21 of 60 seeds fail; without the transaction index rebuilt on truncation, 6 of 100.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.unit.broker.replication_cluster import BROKERS
from tests.unit.broker.simulation_run import compacted_view, run_mode, run_to_end, slow_loop
from tests.unit.broker.transaction_checks import transaction_of
from tests.unit.broker.transaction_sim import TransactionSimulation

# Seeds CI runs, by mode (replication_sim.MODES).
CI_SEEDS = {"default": 10, "power": 3, "delete": 3, "retention": 3, "compaction": 3}
# Compaction seeds CI runs beside the first ones: 27 fails (at step 113) when an aborted record's
# key enters the cleaner's key map and shadows a committed record.
COMPACTION_REGRESSION_SEEDS = (27,)
SLOW_SEEDS = 500
STEPS = 1000


def run(root: Path, seed: int, steps: int = STEPS, **options: bool) -> Counter[str]:
    simulation = TransactionSimulation(root, seed, **options)
    try:
        counts = run_to_end(simulation, seed, steps)
        check_transactions_healed(simulation, seed)
        return counts
    finally:
        simulation.close()


def read_committed_from(
    simulation: TransactionSimulation, broker_id: int, offset: int
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of everything a read_committed reader reads at `broker_id` from
    `offset` to the end."""
    read: list[tuple[int, bytes | None]] = []
    while True:
        records, answer = simulation.read_committed(broker_id, offset)
        assert answer is not None and answer.error_code == 0, answer
        read.extend((record.offset, record.value) for record in records)
        if answer.next_fetch_offset <= offset:
            return read
        offset = answer.next_fetch_offset


def check_transactions_healed(simulation: TransactionSimulation, seed: int) -> None:
    """No transaction hangs, and a read_committed reader reads, from every replica, exactly the
    log without markers and without the aborted transactions' records: each committed
    transaction's records once each, in order."""
    hosts = {broker_id: simulation.brokers[broker_id].hosted() for broker_id in BROKERS}
    # After DeleteRecords each replica starts where it caught up with the leader's log start:
    # they agree from the latest start on.
    common = max(hosted.log.log_start_offset for hosted in hosts.values() if hosted is not None)
    for broker_id, hosted in hosts.items():
        assert hosted is not None
        stable = hosted.log.last_stable_offset(hosted.high_watermark)
        assert stable == hosted.high_watermark == hosted.log.log_end_offset, (
            f"seed {seed}: broker {broker_id} LSO {stable}, HW {hosted.high_watermark}, "
            f"log end {hosted.log.log_end_offset}: a transaction hangs"
        )

    aborted = {t.number for t in simulation.transactions if t.committed is False}
    expected = [
        (offset, value)
        for offset, value, marker in simulation.stored_records(simulation.state().leader)
        if not marker and transaction_of(value) not in aborted and offset >= common
    ]
    # Any replica serves read_committed readers (KIP-392), from its own aborted index.
    for broker_id, hosted in hosts.items():
        assert hosted is not None
        read = read_committed_from(simulation, broker_id, hosted.log.log_start_offset)
        read = [(offset, value) for offset, value in read if offset >= common]
        if simulation.compaction:  # each replica compacts at its own pace
            same = compacted_view(read) == compacted_view(expected)
        else:
            same = read == expected
        assert same, f"seed {seed}: broker {broker_id} read_committed differs"

    read_by_transaction: dict[int, list[bytes]] = {}
    for _, value in expected:
        number = transaction_of(value)
        if number is not None and value is not None:
            read_by_transaction.setdefault(number, []).append(value)
    acknowledged_at = {value: offset for offset, value in simulation.acked.items()}
    stored = {value for _, value, _ in simulation.stored_records(simulation.state().leader)}
    for transaction in simulation.transactions:
        values = [value for batch in transaction.batches for value in batch.values]
        if transaction.committed is False and simulation.compaction:
            simulation.counts["aborted records cleaned"] += sum(v not in stored for v in values)
        if not transaction.committed:
            continue
        sent = [value for value in values if acknowledged_at[value] >= common]  # not deleted
        got = read_by_transaction.get(transaction.number, [])
        if simulation.compaction:  # a newer record of its key may have superseded a record
            simulation.counts["committed transactional records cleaned"] += len(sent) - len(got)
            sent = [value for value in sent if value in set(got)]
        assert got == sent, f"seed {seed}: transaction {transaction.number} {sent}, {got}"


@pytest.mark.parametrize("seed", range(CI_SEEDS["default"]), ids=lambda seed: f"seed_{seed}")
def test_transactions_stay_all_or_nothing_through_failures(tmp_path: Path, seed: int) -> None:
    counts = run(tmp_path, seed)
    # The run did what it is for: transactions ended through markers, and a reader read.
    assert counts["markers acknowledged"] > 0
    assert counts["records read committed"] > 0


@pytest.mark.parametrize("seed", range(CI_SEEDS["power"]), ids=lambda seed: f"seed_{seed}")
def test_with_flush_messages_1_transactions_survive_a_cluster_power_loss(
    tmp_path: Path, seed: int
) -> None:
    """Producer state and the transaction index are rebuilt from what each broker fsynced."""
    counts = run(tmp_path, seed, flush_each_append=True, power_loss=True)
    assert counts["markers acknowledged"] > 0


def test_transactions_through_records_deleted_on_request(tmp_path: Path) -> None:
    """DeleteRecords among the other steps: the last stable offset never falls below the log
    start (every seed failed that check before it was clamped), and no transaction hangs."""
    totals = run_mode(run, tmp_path, "delete", range(CI_SEEDS["delete"]))
    assert totals["records deleted on request"] > 0
    assert totals["markers acknowledged"] > 0


def test_transactions_through_retention(tmp_path: Path) -> None:
    """Retention deletes every committed closed segment, open transactions' first records
    among them: the last stable offset stays within the log, and no transaction hangs."""
    totals = run_mode(run, tmp_path, "retention", range(CI_SEEDS["retention"]))
    assert totals["records deleted by retention"] > 0
    assert totals["markers acknowledged"] > 0


def test_transactions_on_a_compacted_topic(tmp_path: Path) -> None:
    """Transaction-aware compaction bounded by the last stable offset: aborted transactions'
    records removed and shadowing nothing, committed ones compacted like plain records (they
    share keys), COMMIT markers of emptied transactions removed (delete.retention.ms is a
    second here); read_committed readers of every replica agree on each key's newest record,
    no ISR member ever lacks a committed record's key, and no transaction hangs."""
    seeds = [*range(CI_SEEDS["compaction"]), *COMPACTION_REGRESSION_SEEDS]
    totals = run_mode(run, tmp_path, "compaction", seeds)
    assert totals["records removed by compaction"] > 0
    assert totals["aborted records cleaned"] > 0
    assert totals["committed transactional records cleaned"] > 0
    assert totals["markers removed by compaction"] > 0
    assert totals["markers acknowledged"] > 0


@pytest.mark.slow
@pytest.mark.timeout(1800)  # ~1,000 seeds: several minutes on a shared machine
def test_transaction_simulation_many_seeds(tmp_path: Path) -> None:
    totals = slow_loop(run, tmp_path, CI_SEEDS, SLOW_SEEDS)
    assert totals["transactions aborted"] > 0

"""Goal: transactions stay all-or-nothing under every interleaving the replication simulation
reaches: no read_committed reader ever sees a record of an aborted or open transaction, a marker
lost with a leader is written again and ends the same transaction, a late or zombie batch never
lands in a later transaction, and no transaction hangs once the cluster heals.

Method: transaction_sim.py adds a transactional producer, its coordinator's two phases and a
read_committed reader to replication_sim.py's cluster, over the broker's own produce, KIP-890
check, WriteTxnMarkers, producer state, transaction index and read path, and the SDK's decoding
of read_committed answers. A failure names the seed and step; rerun it with `-k "seed_N"`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.unit.broker.replication_sim import BROKERS, run_to_end
from tests.unit.broker.transaction_sim import TransactionSimulation, transaction_of

SEEDS = 12
SLOW_SEEDS = 500
POWER_SEEDS = 4  # with flush.messages=1 and whole-cluster power losses
STEPS = 1000


def run(root: Path, seed: int, steps: int = STEPS, **options: bool) -> Counter[str]:
    simulation = TransactionSimulation(root, seed, **options)
    try:
        counts = run_to_end(simulation, seed, steps)
        check_transactions_healed(simulation, seed)
        return counts
    finally:
        simulation.close()


def check_transactions_healed(simulation: TransactionSimulation, seed: int) -> None:
    """No transaction hangs; every replica indexed the same aborted transactions; read_committed
    of the whole log is the log without markers and aborted transactions' records."""
    indexes = []
    for broker_id in BROKERS:
        hosted = simulation.brokers[broker_id].hosted()
        assert hosted is not None
        log = hosted.log
        stable = log.last_stable_offset(hosted.high_watermark)
        assert stable == hosted.high_watermark == log.log_end_offset, (
            f"seed {seed}: broker {broker_id} LSO {stable}, HW {hosted.high_watermark}, "
            f"log end {log.log_end_offset}: a transaction hangs"
        )
        indexes.append(log.aborted_transactions(log.log_start_offset, log.log_end_offset))
    assert all(index == indexes[0] for index in indexes), f"seed {seed}: {indexes}"

    stored = simulation.stored_records(simulation.state().leader)
    aborted = {t.number for t in simulation.transactions if t.committed is False}
    expected = [
        (offset, value)
        for offset, value, marker in stored
        if not marker and transaction_of(value) not in aborted
    ]
    read: list[tuple[int, bytes | None]] = []
    offset = 0
    while True:
        records, answer = simulation.read_committed(simulation.state().leader, offset)
        assert answer is not None and answer.error_code == 0, answer
        read.extend((record.offset, record.value) for record in records)
        if answer.next_fetch_offset <= offset:
            break
        offset = answer.next_fetch_offset
    assert read == expected, f"seed {seed}: read_committed differs from the committed log"

    by_transaction: dict[int, list[bytes]] = {}
    for _, value in read:
        number = transaction_of(value)
        if number is not None and value is not None:
            by_transaction.setdefault(number, []).append(value)
    for transaction in simulation.transactions:
        if transaction.committed:
            sent = [value for batch in transaction.batches for value in batch.values]
            assert by_transaction.get(transaction.number, []) == sent, (
                f"seed {seed}: transaction {transaction.number} committed {sent}, read "
                f"{by_transaction.get(transaction.number)}"
            )


@pytest.mark.parametrize("seed", range(SEEDS), ids=lambda seed: f"seed_{seed}")
def test_transactions_stay_all_or_nothing_through_failures(tmp_path: Path, seed: int) -> None:
    counts = run(tmp_path, seed)
    # The run did what it is for: transactions ended through markers, and a reader read.
    assert counts["markers acknowledged"] > 0
    assert counts["records read committed"] > 0


@pytest.mark.parametrize("seed", range(POWER_SEEDS), ids=lambda seed: f"seed_{seed}")
def test_with_flush_messages_1_transactions_survive_a_cluster_power_loss(
    tmp_path: Path, seed: int
) -> None:
    """Producer state and the transaction index are rebuilt from what each broker fsynced."""
    counts = run(tmp_path, seed, flush_each_append=True, power_loss=True)
    assert counts["markers acknowledged"] > 0


@pytest.mark.slow
def test_transaction_simulation_many_seeds(tmp_path: Path) -> None:
    totals: Counter[str] = Counter()
    for seed in range(SEEDS, SEEDS + SLOW_SEEDS):
        totals.update(run(tmp_path / f"seed-{seed}", seed))
    for seed in range(POWER_SEEDS, POWER_SEEDS + SLOW_SEEDS // 4):
        totals.update(
            run(tmp_path / f"power-{seed}", seed, flush_each_append=True, power_loss=True)
        )
    print(dict(totals))
    assert totals["transactions aborted"] > 0

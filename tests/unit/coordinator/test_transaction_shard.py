"""The transaction shard: transactions.proto requests in, records and answers out.

Goal: a transactional producer's whole life through the shard — init, add partitions, verify
(as a broker does, KIP-890: PRODUCER_FENCED for a fenced producer, CONCURRENT_TRANSACTIONS while
a decided transaction's markers are written), add a group's offsets, end, markers written —
gives the answers Kafka's coordinator gives; a second request for an id whose write is in
flight answers CONCURRENT_TRANSACTIONS and writes nothing; a new instance fences the old one's
open transaction; timeouts abort and expiry forgets; a shard that replays the records written
equals the one that wrote them, and resumes phase 2.

Method: the runtime's part is played by hand: each step's record is "written" by keeping it,
then `on_durable` is called; a fresh shard replays the kept records.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.transaction_model import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
)
from samsa.services.coordinator.transaction_shard import TransactionShard, TxnStep
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

T0 = 1_000_000


class Log:
    """The records written, in order, and a durable write of a step."""

    def __init__(self, shard: TransactionShard) -> None:
        self.shard = shard
        self.records: list[tuple[bytes, bytes | None]] = []

    def durable(self, step: TxnStep) -> TxnStep:  # type: ignore[type-arg]
        if step.record is not None:
            self.records.append(step.record)
        self.shard.on_durable(step)
        return step

    def reloaded(self) -> TransactionShard:
        fresh = TransactionShard()
        for key, value in self.records:
            fresh.replay(key, value)
        return fresh


def producer(pid: int, epoch: int, name: str = "t1") -> x.TransactionalProducer:
    return x.TransactionalProducer(transactional_id=name, producer_id=pid, producer_epoch=epoch)


def init(shard: TransactionShard, name: str = "t1", pid: int | None = 42, now: int = T0):
    request = x.InitTransactionsRequest(transactional_id=name, transaction_timeout_ms=60_000)
    return shard.init_transactions(
        request, now, pid if shard.init_needs_producer_id(request) else None
    )


def add(
    shard: TransactionShard, who: x.TransactionalProducer, *parts: tuple[str, int], verify=False
):
    request = x.AddPartitionsToTxnRequest(
        producer=who,
        partitions=[c.TopicPartitions(topic=topic, partitions=[p]) for topic, p in parts],
        verify_only=verify,
    )
    if verify:
        return shard.verify_partitions(request)
    return shard.add_partitions(request, T0 + 10)


def end(shard: TransactionShard, who: x.TransactionalProducer, commit: bool, now: int = T0 + 20):
    return shard.end_transaction(x.EndTxnRequest(producer=who, committed=commit), now, None)


def complete(shard: TransactionShard, name: str, now: int) -> TxnStep:  # type: ignore[type-arg]
    """Phase 2 done and no add came meanwhile: COMPLETE_x's own write."""
    step = shard.completion_step(shard.markers_written(name, now))
    assert step is not None and step.record is not None
    return step


def test_a_transaction_from_init_to_complete_commit():
    shard = TransactionShard()
    log = Log(shard)
    first = log.durable(init(shard))
    assert (first.response.producer_id, first.response.producer_epoch) == (42, 0)
    me = producer(42, 0)
    added = log.durable(add(shard, me, ("orders", 0), ("orders", 1)))
    assert added.response.error_code == 0 and len(added.response.results) == 2
    assert shard.transactions["t1"].state == ONGOING
    verified = add(shard, me, ("orders", 1), ("orders", 2), verify=True)
    assert [r.error_code for r in verified.results] == [0, ErrorCode.INVALID_TXN_STATE]
    offsets = shard.add_offsets(
        x.AddOffsetsToTxnRequest(producer=me, group_id="g"), ("__consumer_offsets", 7), T0 + 15
    )
    log.durable(offsets)
    assert ("__consumer_offsets", 7) in shard.transactions["t1"].partitions
    ended = log.durable(end(shard, me, commit=True))
    assert (ended.response.producer_id, ended.response.producer_epoch) == (42, 1), "KIP-890 bump"
    markers = ended.outcome.markers
    assert markers is not None and markers.txn_commit and markers.producer_epoch == 1
    assert markers.partitions == (("__consumer_offsets", 7), ("orders", 0), ("orders", 1))
    assert shard.transactions["t1"].state == PREPARE_COMMIT
    # phase 2 under way: the producer's next requests wait
    busy = init(shard)
    assert busy.response.error_code == ErrorCode.CONCURRENT_TRANSACTIONS and busy.record is None
    log.durable(complete(shard, "t1", T0 + 30))
    assert shard.transactions["t1"].state == COMPLETE_COMMIT
    # a retried EndTxn (the answer was lost) succeeds with the same identity, writing nothing
    retry = end(shard, me, commit=True)
    assert (retry.response.error_code, retry.response.producer_epoch, retry.record) == (0, 1, None)
    assert log.reloaded().transactions == shard.transactions


def test_the_next_transactions_first_add_supersedes_complete_commit():
    """Phase 2 done: COMPLETE_COMMIT is the state at once, so the add that waited on it decides
    now, at the bumped epoch, and its ONGOING record is the one write: COMPLETE_COMMIT's own is
    no longer asked for, and a reload of what was written (PREPARE_COMMIT, then ONGOING) holds
    the same state with no phase 2 to resume."""
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard))
    log.durable(add(shard, producer(42, 0), ("orders", 0)))
    ended = log.durable(end(shard, producer(42, 0), commit=True))
    waiting = add(shard, producer(42, 1), ("orders", 1))
    assert waiting.response.error_code == ErrorCode.CONCURRENT_TRANSACTIONS, "phase 2 runs"
    completed = shard.markers_written("t1", T0 + 30)
    assert shard.transactions["t1"].state == COMPLETE_COMMIT
    retry = end(shard, producer(42, 0), commit=True)
    assert (retry.response.error_code, retry.record) == (0, None), "a retried EndTxn: done"
    added = add(shard, producer(42, 1), ("orders", 1))
    assert added.response.error_code == 0 and added.record is not None
    assert shard.completion_step(completed) is None, "the add's record is being written"
    log.durable(added)
    assert shard.completion_step(completed) is None, "superseded"
    assert shard.transactions["t1"].state == ONGOING
    assert shard.transactions["t1"].producer_epoch == ended.response.producer_epoch == 1
    reloaded = log.reloaded()
    assert reloaded.transactions == shard.transactions
    assert reloaded.resume_after_load() == []


def test_complete_is_written_when_nothing_supersedes_it():
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard))
    log.durable(add(shard, producer(42, 0), ("orders", 0)))
    log.durable(end(shard, producer(42, 0), commit=False))
    completed = shard.markers_written("t1", T0 + 30)
    assert log.reloaded().transactions["t1"].state == PREPARE_ABORT, "not written yet"
    step = shard.completion_step(completed)
    assert step is not None
    busy = add(shard, producer(42, 1), ("orders", 1))
    assert busy.response.error_code == ErrorCode.CONCURRENT_TRANSACTIONS, "one write at a time"
    log.durable(step)
    assert log.reloaded().transactions == shard.transactions
    assert shard.transactions["t1"].state == COMPLETE_ABORT


def test_a_write_in_flight_makes_every_other_request_for_the_id_wait():
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard))
    in_flight = add(shard, producer(42, 0), ("orders", 0))
    assert in_flight.record is not None and "t1" in shard.pending
    for step in (add(shard, producer(42, 0), ("orders", 1)), end(shard, producer(42, 0), False)):
        assert step.response.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        assert step.record is None
    verified = add(shard, producer(42, 0), ("orders", 0), verify=True)
    assert verified.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    shard.on_failed(in_flight)
    assert "t1" not in shard.pending and shard.transactions["t1"].state != ONGOING


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction():
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard))
    log.durable(add(shard, producer(42, 0), ("orders", 0)))
    fence = log.durable(init(shard))
    assert fence.response.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert fence.outcome.markers is not None and not fence.outcome.markers.txn_commit
    assert shard.transactions["t1"].state == PREPARE_ABORT
    log.durable(complete(shard, "t1", T0 + 5))
    again = log.durable(init(shard))
    assert (again.response.producer_id, again.response.producer_epoch) == (42, 2)
    late = end(shard, producer(42, 0), commit=True)
    assert late.response.error_code == ErrorCode.PRODUCER_FENCED


def verified_code(shard: TransactionShard, who: x.TransactionalProducer) -> str:
    return ErrorCode(add(shard, who, ("orders", 0), verify=True).error_code).name


def test_verification_answers_the_code_the_broker_and_the_producer_act_on():
    """Kafka's order (handleVerifyPartitionsInTransaction): an unknown id, then the producer's
    identity (a fenced epoch is PRODUCER_FENCED: the producer closes, not aborts), then a
    decided transaction whose markers are being written (CONCURRENT_TRANSACTIONS: the broker
    asks again), INVALID_TXN_STATE only when no open transaction holds the partition."""
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard))
    log.durable(add(shard, producer(42, 0), ("orders", 0)))
    log.durable(end(shard, producer(42, 0), commit=True))  # PREPARE_COMMIT at epoch 1
    assert verified_code(shard, producer(42, 1)) == "CONCURRENT_TRANSACTIONS"
    assert verified_code(shard, producer(42, 0)) == "PRODUCER_FENCED"
    assert verified_code(shard, producer(43, 1)) == "INVALID_PRODUCER_ID_MAPPING"
    assert verified_code(shard, producer(42, 0, "t2")) == "INVALID_PRODUCER_ID_MAPPING"
    log.durable(complete(shard, "t1", T0 + 30))
    assert verified_code(shard, producer(42, 1)) == "INVALID_TXN_STATE", "none open"

    log.durable(add(shard, producer(42, 1), ("orders", 0)))
    log.durable(init(shard))  # a new instance fences the open transaction: PREPARE_ABORT
    assert verified_code(shard, producer(42, 1)) == "PRODUCER_FENCED"
    shard.markers_written("t1", T0 + 40)
    assert verified_code(shard, producer(42, 1)) == "PRODUCER_FENCED"


def test_a_loaded_shard_resumes_phase_two():
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard))
    log.durable(add(shard, producer(42, 0), ("orders", 3)))
    log.durable(end(shard, producer(42, 0), commit=False))
    loaded = log.reloaded()
    resumed = loaded.resume_after_load()
    assert [step.outcome.markers.partitions for step in resumed] == [(("orders", 3),)]  # type: ignore[union-attr]
    assert all(step.record is None for step in resumed)


def test_timeouts_abort_and_idle_ids_expire():
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard))
    log.durable(add(shard, producer(42, 0), ("orders", 0)))
    assert shard.abort_timed_out(T0 + 10 + 60_000) == []
    (aborted,) = shard.abort_timed_out(T0 + 10 + 60_001)
    log.durable(aborted)
    assert shard.transactions["t1"].state == PREPARE_ABORT
    log.durable(complete(shard, "t1", T0 + 70_000))
    assert shard.expire(T0 + 70_001, expiration_ms=1_000) == []
    (gone,) = shard.expire(T0 + 71_000, expiration_ms=1_000)
    assert gone.record is not None and gone.record[1] is None, "a tombstone"
    log.durable(gone)
    assert shard.transactions == {} and log.reloaded().transactions == {}


def test_list_and_describe():
    shard = TransactionShard()
    log = Log(shard)
    log.durable(init(shard, "a", 1))
    log.durable(init(shard, "b", 2))
    log.durable(add(shard, producer(2, 0, "b"), ("orders", 4)))
    ongoing = x.ListTransactionsRequest(state_filters=[ONGOING])
    assert [t.transactional_id for t in shard.list_transactions(ongoing, T0 + 20)] == ["b"]
    old = x.ListTransactionsRequest(duration_filter_ms=5_000)
    assert shard.list_transactions(old, T0 + 20) == []
    assert [t.transactional_id for t in shard.list_transactions(old, T0 + 10 + 5_000)] == ["b"]
    described = shard.describe_transaction("b")
    assert (described.state, described.producer_id) == (ONGOING, 2)
    assert [(p.topic, list(p.partitions)) for p in described.partitions] == [("orders", [4])]
    missing = shard.describe_transaction("zz")
    assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_init_ignores_the_kip_360_identity_fields() -> None:
    # transactions.proto: InitTransactionsRequest.producer_id/epoch are not used today; every
    # init is a new instance's and bumps the epoch, whatever identity the request names.
    shard = TransactionShard()
    log = Log(shard)
    first = log.durable(init(shard)).response
    named = x.InitTransactionsRequest(
        transactional_id="t1",
        transaction_timeout_ms=60_000,
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
    )
    stale = x.InitTransactionsRequest(
        transactional_id="t1", transaction_timeout_ms=60_000, producer_id=999, producer_epoch=7
    )
    for request, epoch in ((named, 1), (stale, 2)):
        answer = log.durable(shard.init_transactions(request, T0, None)).response
        assert answer.error_code == ErrorCode.NONE
        assert (answer.producer_id, answer.producer_epoch) == (first.producer_id, epoch)

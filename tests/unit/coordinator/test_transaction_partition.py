"""Goal: TransactionPartition carries out phase 2 of the two-phase commit as DESIGN §5 says: once
PREPARE_x is durable and answered, a marker at the bumped epoch goes to every partition of the
transaction, each retried until written or moot (a leader moved, a topic deleted), and
COMPLETE_x is recorded only after the last one; timeouts and a new instance abort (and fence)
an open transaction the same way.

Method: a real TransactionPartition (load, fence, writer task, phase 2, timer) over the
in-process fakes of transaction_harness.py: an in-memory `__transaction_state` and a scripted
WriteTxnMarkers. Every assertion reads the fakes' records: what was written to the log, and
which markers went where with which epoch.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from transaction_harness import TransactionHarness, next_identity, producer, until

from samsa.common.errors import ErrorCode

A0, A1, B0 = ("t", 0), ("t", 1), ("u", 0)


def test_a_commit_writes_markers_at_the_bumped_epoch_then_complete_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch, topics={"t": 2, "u": 1})
        async with harness.running():
            who = await harness.open_transaction("app", A0, A1, B0)
            answer = await harness.end(who, commit=True)
            assert answer.error_code == ErrorCode.NONE
            assert (answer.producer_id, answer.producer_epoch) == (
                who.producer_id,
                who.producer_epoch + 1,
            ), "every end bumps the epoch (KIP-890)"
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "completed")
            [call] = harness.markers.calls
            assert call.producer_id == who.producer_id
            assert call.producer_epoch == who.producer_epoch + 1, "markers carry the bumped epoch"
            assert call.committed
            assert call.coordinator_epoch == harness.assignment_epoch
            assert set(call.partitions) == {A0, A1, B0}
            assert harness.log.states("app") == [
                "EMPTY",
                "ONGOING",
                "PREPARE_COMMIT",
                "COMPLETE_COMMIT",
            ]

    asyncio.run(run())


def test_complete_commit_waits_for_a_partition_whose_leader_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        harness.markers.answers[A1] = [
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.NOT_ENOUGH_REPLICAS,
            ErrorCode.LEADER_NOT_AVAILABLE,
        ]
        async with harness.running():
            who = await harness.open_transaction("app", A0, A1)
            await harness.end(who, commit=True)
            await until(lambda: len(harness.markers.calls) == 4, "three retries")
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "completed")
            partitions = [call.partitions for call in harness.markers.calls]
            assert partitions == [(A0, A1), (A1,), (A1,), (A1,)], "only the unwritten are retried"
            epochs = {call.producer_epoch for call in harness.markers.calls}
            assert epochs == {who.producer_epoch + 1}, "a retry keeps the decision's epoch"

    asyncio.run(run())


def test_no_complete_commit_while_a_marker_is_unwritten(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        harness.markers.answers[A1] = [ErrorCode.NOT_ENOUGH_REPLICAS] * 10_000
        async with harness.running():
            who = await harness.open_transaction("app", A0, A1)
            answer = await harness.end(who, commit=True)
            await until(lambda: len(harness.markers.calls) >= 20, "retrying")
            assert harness.log.states("app")[-1] == "PREPARE_COMMIT"
            assert harness.state("app") == "PREPARE_COMMIT"
            busy = await harness.add(next_identity(who, answer), A0)
            assert busy.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
            harness.markers.answers[A1].clear()
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "completed")

    asyncio.run(run())


def test_a_marker_to_a_deleted_topic_is_moot_but_not_while_the_image_still_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch, topics={"t": 2, "u": 1})
        harness.markers.answers[B0] = [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 10_000
        async with harness.running():
            who = await harness.open_transaction("app", A0, B0)
            await harness.end(who, commit=False)
            await until(lambda: len(harness.markers.calls) >= 5, "retrying")
            assert harness.state("app") == "PREPARE_ABORT", "the broker may only lag the image"
            del harness.offsets_log.topics["u"]  # the deletion reaches this coordinator
            await until(lambda: "COMPLETE_ABORT" in harness.log.states("app"), "completed")
            assert not harness.markers.calls[-1].committed

    asyncio.run(run())


def test_a_marker_refused_as_late_is_moot(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        harness.markers.answers[A1] = [ErrorCode.INVALID_PRODUCER_EPOCH]
        async with harness.running():
            who = await harness.open_transaction("app", A0, A1)
            await harness.end(who, commit=True)
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "completed")
            assert len(harness.markers.calls) == 1

    asyncio.run(run())


def test_the_next_transactions_add_supersedes_complete_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        harness.markers.gate = asyncio.Event()
        async with harness.running():
            who = await harness.open_transaction("app", A0)
            answer = await harness.end(who, commit=True)
            after = next_identity(who, answer)
            waiting = asyncio.ensure_future(harness.add(after, A1, settle_s=5.0))
            await harness.markers.called.wait()
            harness.markers.gate.set()
            added = await waiting
            assert added.error_code == ErrorCode.NONE, "answered once phase 2 was done"
            await asyncio.sleep(0.05)  # past COMPLETION_DELAY_S
            assert harness.log.states("app") == ["EMPTY", "ONGOING", "PREPARE_COMMIT", "ONGOING"]
            reloaded = await harness.reload()
            assert reloaded.shard.transactions == harness.partition.shard.transactions
            assert harness.state("app") == "ONGOING"
            assert len(harness.markers.calls) == 1, "nothing decided is left to finish"

    asyncio.run(run())


def test_a_new_instance_aborts_the_open_transaction_and_gets_the_epoch_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running():
            old = await harness.open_transaction("app", A0)
            fencing = await harness.init("app")
            assert fencing.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
            await until(lambda: "COMPLETE_ABORT" in harness.log.states("app"), "aborted")
            [call] = harness.markers.calls
            assert not call.committed
            assert call.producer_epoch == old.producer_epoch + 1, "the abort fences the old epoch"
            fresh = await harness.init("app")
            assert fresh.error_code == ErrorCode.NONE
            assert (fresh.producer_id, fresh.producer_epoch) == (
                old.producer_id,
                old.producer_epoch + 2,
            )
            late = await harness.end(old, commit=True)
            assert late.error_code == ErrorCode.PRODUCER_FENCED

    asyncio.run(run())


def test_a_timed_out_transaction_is_aborted_and_its_commit_then_fenced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch, abort_interval_ms=1)
        harness.markers.gate = asyncio.Event()
        async with harness.running():
            who = await harness.open_transaction("app", A0, A1)
            harness.clock.now += 60_001
            await harness.markers.called.wait()  # the abort is decided; its markers hang
            assert harness.state("app") == "PREPARE_ABORT"
            commit = await harness.end(who, commit=True)
            assert commit.error_code == ErrorCode.PRODUCER_FENCED, "DESIGN §5: fenced"
            again = await harness.init("app")
            assert again.error_code == ErrorCode.CONCURRENT_TRANSACTIONS, "until phase 2 is done"
            harness.markers.gate.set()
            await until(lambda: "COMPLETE_ABORT" in harness.log.states("app"), "aborted")
            [call] = harness.markers.calls
            assert (call.producer_epoch, call.committed) == (who.producer_epoch + 1, False)
            fresh = await harness.init("app")
            assert fresh.producer_epoch == who.producer_epoch + 2

    asyncio.run(run())


def test_an_end_txn_racing_the_timeout_abort_is_answered_once_and_consistently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running():
            who = await harness.open_transaction("app", A0)
            harness.log.hold_next = hold = asyncio.Event()
            harness.clock.now += 60_001
            [abort] = harness.partition.shard.abort_timed_out(harness.clock())
            timed_out = asyncio.ensure_future(harness.partition.run(abort))
            busy = await harness.end(who, commit=True)
            assert busy.error_code == ErrorCode.CONCURRENT_TRANSACTIONS, "the abort is in flight"
            hold.set()
            await timed_out
            fenced = await harness.end(who, commit=True)
            assert fenced.error_code == ErrorCode.PRODUCER_FENCED
            await until(lambda: "COMPLETE_ABORT" in harness.log.states("app"), "aborted")
            assert [c.committed for c in harness.markers.calls] == [False]

    asyncio.run(run())


def test_a_lost_end_txn_answer_is_answered_again_without_a_second_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running():
            who = await harness.open_transaction("app", A0)
            first = await harness.end(who, commit=True)
            retry = await harness.end(who, commit=True)
            assert (retry.error_code, retry.producer_epoch) == (
                ErrorCode.NONE,
                first.producer_epoch,
            )
            other = await harness.end(who, commit=False)
            assert other.error_code == ErrorCode.INVALID_TXN_STATE
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "completed")
            assert harness.log.states("app").count("PREPARE_COMMIT") == 1
            assert len(harness.markers.calls) == 1

    asyncio.run(run())


def test_an_exhausted_epoch_moves_to_a_new_producer_id_after_the_markers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        async with harness.running():
            who = await harness.open_transaction("app", A0)
            # As if 32766 transactions had ended: the shard's state, set by hand.
            current = harness.partition.shard.transactions["app"]
            harness.partition.shard.transactions["app"] = replace(current, producer_epoch=32766)
            answer = await harness.end(producer("app", who.producer_id, 32766), commit=True)
            assert answer.producer_id != who.producer_id and answer.producer_epoch == 0
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "completed")
            [call] = harness.markers.calls
            assert (call.producer_id, call.producer_epoch) == (who.producer_id, 32767)
            completed = harness.partition.shard.transactions["app"]
            assert (completed.producer_id, completed.producer_epoch) == (answer.producer_id, 0)

    asyncio.run(run())

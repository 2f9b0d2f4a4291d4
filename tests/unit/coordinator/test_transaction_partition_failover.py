"""Goal: a decided transaction is finished whatever happens to the coordinator that decided it
(DESIGN §5: "coordinator failover resumes phase 2 from the log"), and a partition that is given
up or fails leaves nothing running: a new owner resumes phase 2 of every PREPARE_x with the
decision's own epoch; a failed or stopped partition writes no COMPLETE_x and keeps no task; an
error in phase 2 does not strand the transactional id in PREPARE_x.

Method: the harness of transaction_harness.py (a real TransactionPartition over in-memory fakes
of `__transaction_state` and WriteTxnMarkers); a failover is `reload`, which stops the partition
and loads a new owner, at the next assignment epoch, from the same log.
"""

from __future__ import annotations

import asyncio

import pytest
from transaction_harness import TransactionHarness, other_tasks, until

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.coordinator import transaction_records
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.transaction_model import (
    PREPARE_EPOCH_FENCE,
    TransactionMetadata,
)

A0, A1 = ("t", 0), ("t", 1)


@pytest.mark.parametrize("commit", [True, False])
def test_a_new_owner_resumes_phase_2_with_the_decisions_epoch(
    monkeypatch: pytest.MonkeyPatch, commit: bool
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        harness.markers.gate = asyncio.Event()  # the first owner's markers never return
        async with harness.running():
            who = await harness.open_transaction("app", A0, A1)
            answer = await harness.end(who, commit=commit)
            await harness.markers.called.wait()
            harness.markers.gate = None
            reloaded = await harness.reload()
            decided = "COMMIT" if commit else "ABORT"
            await until(lambda: f"COMPLETE_{decided}" in harness.log.states("app"), "resumed")
            first, resumed = harness.markers.calls
            assert resumed.producer_epoch == first.producer_epoch == answer.producer_epoch
            assert resumed.committed is commit
            assert resumed.partitions == (A0, A1)
            assert (first.coordinator_epoch, resumed.coordinator_epoch) == (0, 1)
            assert harness.log.states("app").count(f"COMPLETE_{decided}") == 1
            assert reloaded.shard.transactions["app"].state.name == f"COMPLETE_{decided}"

    asyncio.run(run())


def test_a_new_owner_writes_again_the_markers_written_before_and_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        harness.markers.answers[A1] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 10_000
        async with harness.running():
            who = await harness.open_transaction("app", A0, A1)
            await harness.end(who, commit=True)
            await until(lambda: len(harness.markers.calls) >= 3, "A1 retried")
            await harness.partition.stop()
            calls_at_stop = len(harness.markers.calls)
            await asyncio.sleep(0.02)
            assert len(harness.markers.calls) == calls_at_stop, "a stopped owner retries nothing"
            assert harness.log.states("app")[-1] == "PREPARE_COMMIT"
            harness.markers.answers[A1].clear()  # the leader is back
            await harness.reload()
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "resumed")
            assert harness.markers.calls[calls_at_stop].partitions == (A0, A1)

    asyncio.run(run())


def test_a_loaded_epoch_fence_is_aborted_at_its_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        fence = TransactionMetadata(
            "app",
            producer_id=77,
            producer_epoch=5,
            transaction_timeout_ms=60_000,
            state=PREPARE_EPOCH_FENCE,
            last_update_ms=1,
            partitions=frozenset({A0}),
            transaction_start_ms=1,
        )
        key, value = transaction_records.encode(fence)
        await harness.log.produce("", 0, build_batch([value], keys=[key]))
        async with harness.running():
            await until(lambda: "COMPLETE_ABORT" in harness.log.states("app"), "aborted")
            assert harness.log.states("app") == [
                "PREPARE_EPOCH_FENCE",
                "PREPARE_ABORT",
                "COMPLETE_ABORT",
            ]
            [call] = harness.markers.calls
            assert (call.producer_id, call.producer_epoch, call.committed) == (77, 5, False)

    asyncio.run(run())


def test_stopping_during_phase_2_leaves_no_task_and_writes_no_completion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch, abort_interval_ms=1)
        harness.markers.gate = asyncio.Event()
        await harness.start()
        who = await harness.open_transaction("app", A0)
        await harness.end(who, commit=True)
        await harness.markers.called.wait()
        await harness.partition.stop()
        assert not harness.partition._work
        assert other_tasks() == set(), "every task of the partition ended with it"
        harness.markers.gate.set()
        await asyncio.sleep(0.02)
        assert harness.log.states("app")[-1] == "PREPARE_COMMIT"

    asyncio.run(run())


def test_a_write_in_flight_when_the_partition_is_given_up_answers_not_coordinator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        await harness.start()
        who = await harness.open_transaction("app", A0)
        harness.log.hold_next = asyncio.Event()
        ending = asyncio.ensure_future(harness.end(who, commit=True))
        await until(lambda: harness.log.hold_next is None, "the write is in flight")
        await harness.partition.stop()
        with pytest.raises(PartitionUnavailableError) as raised:
            await ending
        assert raised.value.code == ErrorCode.NOT_COORDINATOR
        assert harness.state("app") == "ONGOING", "the old state stands"

    asyncio.run(run())


def test_a_partition_fenced_by_a_newer_owner_ends_and_keeps_no_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch, abort_interval_ms=1)
        await harness.start()
        who = await harness.open_transaction("app", A0)
        harness.log.fail_next = ErrorCode.INVALID_PRODUCER_EPOCH  # a newer owner's fence
        with pytest.raises(PartitionUnavailableError):
            await harness.end(who, commit=True)
        await until(lambda: harness.ended == [harness.partition], "the owner told, to reload it")
        await until(lambda: not other_tasks(), "the partition's tasks ended")
        assert harness.markers.calls == [], "nothing was decided"

    asyncio.run(run())


def test_an_error_in_phase_2_ends_the_partition_rather_than_stranding_the_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        harness = TransactionHarness(monkeypatch)
        harness.markers.raise_next = RuntimeError("the marker writer broke")
        async with harness.running():
            who = await harness.open_transaction("app", A0)
            answer = await harness.end(who, commit=True)
            assert answer.error_code == ErrorCode.NONE, "the decision is durable"
            await until(lambda: harness.ended, "the partition gave up")
            await harness.reload()  # what the coordinator does for a partition it owns
            await until(lambda: "COMPLETE_COMMIT" in harness.log.states("app"), "resumed")

    asyncio.run(run())

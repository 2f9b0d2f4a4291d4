"""Goal: TxnOffsetCommit decides against the group as it is when the offsets are written, not as
it was before the transaction coordinator answered the KIP-890 check: a member that left (or was
fenced) while the check was in flight must not commit (KIP-447, a zombie's offsets), as Kafka
validates the commit after its verification. A refused check is answered with the transaction
coordinator's code, the hint to call AddOffsetsToTxn only when that is what is missing (not to a
fenced producer).

Method: the servicer's TxnOffsetCommit over a fake coordinator whose group partition is a real
GroupCoordinatorShard (group_harness) and whose transaction check makes the member leave before
it confirms, or refuses; the transactional writes are recorded, not sent.
"""

from __future__ import annotations

import asyncio

from group_harness import GroupHarness

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.offsets_partition import TxnWriteRefusedError
from samsa.services.coordinator.transaction_servicer import TransactionCoordinatorServicer
from samsa.v1 import transactions_pb2 as x


class FakePartition:
    partition = 3

    def __init__(self, harness: GroupHarness) -> None:
        self.shard = harness.coordinator
        self.written: list[tuple[int, int, list]] = []

    async def write_transactional(self, producer_id: int, producer_epoch: int, records) -> None:
        self.written.append((producer_id, producer_epoch, records))


class FakeCheck:
    def __init__(self, meanwhile, verdict=None) -> None:
        self.meanwhile = meanwhile
        self.verdict = verdict

    async def ask(self, transactional_id, producer_id, epoch, partitions, *, add=False):
        self.meanwhile()  # the group moves on while the transaction coordinator answers
        return dict.fromkeys(partitions, self.verdict)


class FakeCoordinator:
    def __init__(self, harness: GroupHarness, meanwhile, verdict=None) -> None:
        self.topics = harness.topics
        self.topic_ids: dict[str, bytes] = {}
        self.partition = FakePartition(harness)
        self.transaction_check = FakeCheck(meanwhile, verdict)

    def partition_for(self, group_id: str) -> FakePartition:
        return self.partition


def request(member_id: str, member_epoch: int) -> x.TxnOffsetCommitRequest:
    commit = x.TxnOffsetCommitRequest(
        producer=x.TransactionalProducer(transactional_id="tx", producer_id=7, producer_epoch=2),
        group_id="g",
        member_id=member_id,
        member_epoch=member_epoch,
    )
    commit.topics.add(name="t").partitions.add(partition=0, committed_offset=10)
    return commit


def test_a_member_that_left_during_the_check_does_not_commit() -> None:
    harness = GroupHarness()
    epoch = harness.join("m").member_epoch
    coordinator = FakeCoordinator(harness, lambda: harness.heartbeat("m", -1))
    servicer = TransactionCoordinatorServicer(coordinator)  # type: ignore[arg-type]
    response = asyncio.run(servicer.txn_offset_commit(request("m", epoch)))
    assert [r.error_code for r in response.results] == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert coordinator.partition.written == []


def test_a_member_still_in_the_group_commits() -> None:
    harness = GroupHarness()
    epoch = harness.join("m").member_epoch
    coordinator = FakeCoordinator(harness, lambda: None)
    servicer = TransactionCoordinatorServicer(coordinator)  # type: ignore[arg-type]
    response = asyncio.run(servicer.txn_offset_commit(request("m", epoch)))
    assert [r.error_code for r in response.results] == [ErrorCode.NONE]
    [(producer_id, producer_epoch, records)] = coordinator.partition.written
    assert (producer_id, producer_epoch, len(records)) == (7, 2, 1)


def test_a_refused_check_answers_its_code_and_names_add_offsets_only_when_it_is_missing() -> None:
    harness = GroupHarness()
    epoch = harness.join("m").member_epoch
    for code, hinted in (
        (ErrorCode.PRODUCER_FENCED, False),
        (ErrorCode.CONCURRENT_TRANSACTIONS, False),
        (ErrorCode.INVALID_TXN_STATE, True),
    ):
        verdict = (code, "the transaction coordinator: refused")
        coordinator = FakeCoordinator(harness, lambda: None, verdict)
        servicer = TransactionCoordinatorServicer(coordinator)  # type: ignore[arg-type]
        response = asyncio.run(servicer.txn_offset_commit(request("m", epoch)))
        [result] = response.results
        assert result.error_code == code
        assert ("AddOffsetsToTxn" in result.error_message) == hinted, result.error_message
        assert coordinator.partition.written == []


class RefusingPartition(FakePartition):
    async def write_transactional(self, producer_id: int, producer_epoch: int, records) -> None:
        raise TxnWriteRefusedError(ErrorCode.MESSAGE_TOO_LARGE, "batch of 2 MB exceeds 1 MiB")


def test_offsets_refused_as_too_large_answer_invalid_commit_offset_size() -> None:
    """Kafka's answer for a commit whose records the log refuses as too large: not retriable,
    saying what to fix."""
    harness = GroupHarness()
    epoch = harness.join("m").member_epoch
    coordinator = FakeCoordinator(harness, lambda: None)
    coordinator.partition = RefusingPartition(harness)
    servicer = TransactionCoordinatorServicer(coordinator)  # type: ignore[arg-type]
    [result] = asyncio.run(servicer.txn_offset_commit(request("m", epoch))).results
    assert result.error_code == ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    assert "batch of 2 MB exceeds 1 MiB" in result.error_message
    assert "commit fewer partitions" in result.error_message

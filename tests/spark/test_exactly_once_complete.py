"""Goal: the exactly-once sink's driver side (ExactlyOnceStreamWriter.commit / abort) ends every
task's prepared transaction it can, and says what went wrong in a Spark user's terms. Spark calls
abort(messages) after a commit that failed part-way, with the same messages, so abort meets
transactions the commit already committed; it must still abort the others (an open one holds
back read_committed readers of every partition it wrote until transaction.timeout.ms). A task's
look before it writes decides from its group's offsets (the batch its transaction committed), not
from its transaction's state: the same id serves every batch. Pure: a fake Admin, no Spark
session, no cluster."""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest

from samsa.client.group_admin import OffsetAndMetadata
from samsa.client.transaction_admin import (
    PreparedTransaction,
    TransactionDescription,
    TransactionError,
)
from samsa.common.errors import ErrorCode
from samsa.spark import exactly_once
from samsa.spark.exactly_once import ExactlyOnceStreamWriter, TaskTransaction
from samsa.spark.sink import WriteOptions


class FakeAdmin:
    """Each transactional id's state, and what complete_transaction answers for it; each
    group's committed offset on out-0, and the one its id's open transaction would commit."""

    def __init__(
        self,
        states: dict[str, str],
        refusals: dict[str, ErrorCode],
        offsets: dict[str, int] | None = None,
        pending: dict[str, int] | None = None,
    ) -> None:
        self.states = states
        self.refusals = refusals
        self.offsets = offsets or {}
        self.pending = pending or {}
        self.completed: list[tuple[str, bool]] = []

    def __call__(self, config: dict) -> FakeAdmin:
        return self

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool) -> None:
        name = prepared.transactional_id
        code = self.refusals.get(name)
        if code is None and self.states[name] == "CompleteCommit" and not commit:
            code = ErrorCode.INVALID_TXN_STATE
        if code is not None:
            raise TransactionError.of(code, f"{name}: refused")
        self.completed.append((name, commit))
        self.states[name] = "CompleteCommit" if commit else "CompleteAbort"
        self.settle(name, commit)

    def settle(self, name: str, commit: bool) -> None:
        """The markers reached the group: its pending offset is applied or dropped."""
        pending = self.pending.pop(name, None)
        if commit and pending is not None:
            self.offsets[name] = pending

    def describe_transactions(self, names: list[str]) -> dict[str, TransactionDescription]:
        for name in names:
            if name not in self.states:
                raise TransactionError.of(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, name)
        return {
            name: TransactionDescription(name, self.states[name], 7, 2, 300_000, -1, ())
            for name in names
        }

    def list_consumer_group_offsets(
        self, group: str, partitions: list[tuple[str, int]] | None, require_stable: bool
    ) -> dict[tuple[str, int], OffsetAndMetadata]:
        assert partitions in (None, [("out", 0)]) and require_stable, "the decided offsets"
        assert group not in self.pending, "asked while its transaction is open: would wait"
        found = self.offsets.get(group)
        return {} if found is None else {("out", 0): OffsetAndMetadata(found)}


def messages(count: int) -> list[TaskTransaction]:
    names = [f"spark-q-{task}" for task in range(count)]
    return [TaskTransaction(n, PreparedTransaction(n, 7, 1), 10) for n in names]


def writer() -> ExactlyOnceStreamWriter:
    return ExactlyOnceStreamWriter(WriteOptions({"bootstrap.servers": "h:1"}, "out"))


def test_abort_after_a_part_way_commit_aborts_every_transaction_still_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = messages(3)
    admin = FakeAdmin(
        {"spark-q-0": "Ongoing", "spark-q-1": "Ongoing", "spark-q-2": "Ongoing"},
        {"spark-q-1": ErrorCode.COORDINATOR_NOT_AVAILABLE},
    )
    monkeypatch.setattr(exactly_once, "Admin", admin)
    with pytest.raises(TransactionError):
        writer().commit(sent, 3)  # task 0 committed, task 1's coordinator is gone
    del admin.refusals["spark-q-1"]
    writer().abort(sent, 3)  # Spark aborts with the same messages
    assert admin.completed == [
        ("spark-q-0", True),
        ("spark-q-1", False),
        ("spark-q-2", False),
    ]


def test_abort_tries_every_transaction_and_raises_the_first_failure_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent = messages(4)
    admin = FakeAdmin(
        dict.fromkeys(("spark-q-0", "spark-q-1", "spark-q-2", "spark-q-3"), "Ongoing"),
        {
            "spark-q-0": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "spark-q-3": ErrorCode.PRODUCER_FENCED,  # its timeout aborted it: not a failure
        },
    )
    monkeypatch.setattr(exactly_once, "Admin", admin)
    with pytest.raises(TransactionError, match="spark-q-0"):
        writer().abort([None, *sent], 3)
    assert admin.completed == [("spark-q-1", False), ("spark-q-2", False)]


def test_a_transaction_aborted_before_the_commit_is_reported_in_the_sinks_terms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The coordinator aborted task 1's transaction at its timeout (the batch took longer than
    transaction.timeout.ms): the driver's commit names the batch, the task's transaction and
    the option to raise, not only 'producer fenced'."""
    sent = messages(2)
    admin = FakeAdmin(
        {"spark-q-0": "Ongoing", "spark-q-1": "CompleteAbort"},
        {"spark-q-1": ErrorCode.PRODUCER_FENCED},
    )
    monkeypatch.setattr(exactly_once, "Admin", admin)
    with pytest.raises(TransactionError, match="batch 3") as raised:
        writer().commit(sent, 3)
    text = str(raised.value)
    assert "spark-q-1" in text and "samsa.transaction.timeout.ms" in text
    assert raised.value.code == ErrorCode.PRODUCER_FENCED


def test_nothing_to_complete_opens_no_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_admin(config: dict) -> None:
        raise AssertionError("no transaction to complete, no Admin")

    monkeypatch.setattr(exactly_once, "Admin", no_admin)
    empty = TaskTransaction("spark-q-0", None, 0)
    writer().commit([empty, None], 3)
    writer().abort([empty, None], 3)


class FakeContext:
    def __init__(self, properties: dict[str, str]) -> None:
        self.properties = properties

    def getLocalProperty(self, key: str) -> str | None:
        return self.properties.get(key)

    def partitionId(self) -> int:
        return 0

    def attemptNumber(self) -> int:
        return 0


class ZombieCommitsFirst(FakeAdmin):
    """A driver of the run before (alive after all) commits the transaction it prepared just
    as this task looks: the look sees it open, the commit lands before any abort."""

    def describe_transactions(self, names: list[str]) -> dict[str, TransactionDescription]:
        described = super().describe_transactions(names)
        if self.states["spark-q-0"] == "Ongoing":
            self.states["spark-q-0"] = "PrepareCommit"  # after the answer left
            self.settle("spark-q-0", True)
        return described

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool) -> None:
        if self.states[prepared.transactional_id] == "PrepareCommit" and not commit:
            raise TransactionError.of(ErrorCode.INVALID_TXN_STATE, "it is being committed")
        super().complete_transaction(prepared, commit)


def task_of_batch_3(monkeypatch: pytest.MonkeyPatch, admin: object, rows: int = 1) -> list[str]:
    """Run write() as task 0 of batch 3 of query q, with `rows` rows for topic out; returns
    the producers it made."""
    made: list[str] = []

    class NoProducer:
        def __init__(self, config: dict) -> None:
            made.append(str(config["transactional.id"]))
            raise RuntimeError("stop here: this task would write")

    context = FakeContext({"sql.streaming.queryId": "q", "streaming.sql.batchId": "3"})
    monkeypatch.setattr(exactly_once.TaskContext, "get", staticmethod(lambda: context))
    monkeypatch.setattr(exactly_once, "Admin", admin)
    monkeypatch.setattr(exactly_once, "Producer", NoProducer)
    empty = pa.record_batch({"value": pa.array([], pa.binary())})
    some = pa.record_batch({"value": pa.array([b"v"] * rows, pa.binary())})
    with contextlib.suppress(RuntimeError):
        writer().write(iter([empty, some]))
    return made


def test_a_replayed_task_writes_nothing_when_a_zombie_driver_commits_its_part_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = ZombieCommitsFirst({"spark-q-0": "Ongoing"}, {}, {"spark-q-0": 3}, {"spark-q-0": 4})
    assert task_of_batch_3(monkeypatch, admin) == []
    assert admin.states["spark-q-0"] == "PrepareCommit"


def test_a_replayed_task_aborts_the_open_part_of_the_run_before_then_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = FakeAdmin({"spark-q-0": "Ongoing"}, {}, {"spark-q-0": 3}, {"spark-q-0": 4})
    assert task_of_batch_3(monkeypatch, admin) == ["spark-q-0"]
    assert admin.completed == [("spark-q-0", False)]  # no zombie commit can land after this
    assert admin.offsets["spark-q-0"] == 3


def test_a_replayed_task_skips_its_part_when_the_group_says_this_batch_committed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = FakeAdmin({"spark-q-0": "CompleteCommit"}, {}, {"spark-q-0": 4})
    assert task_of_batch_3(monkeypatch, admin) == []


def test_the_same_id_writes_the_next_batch_after_the_one_before_committed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its state says CompleteCommit, but of batch 2 (offset 3): not this batch's part."""
    admin = FakeAdmin({"spark-q-0": "CompleteCommit"}, {}, {"spark-q-0": 3})
    assert task_of_batch_3(monkeypatch, admin) == ["spark-q-0"]
    assert admin.completed == []


def test_a_first_batch_finds_neither_id_nor_group_and_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert task_of_batch_3(monkeypatch, FakeAdmin({}, {})) == ["spark-q-0"]


def test_a_task_without_rows_opens_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_admin(config: dict) -> None:
        raise AssertionError("no rows, no look")

    assert task_of_batch_3(monkeypatch, no_admin, rows=0) == []


def test_a_task_without_the_streaming_properties_refuses_to_guess_its_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A made-up id (spark-unknown-0-P) is shared by every query: a part another query
    committed under it would be skipped here as already written."""
    context = FakeContext({})
    monkeypatch.setattr(exactly_once.TaskContext, "get", staticmethod(lambda: context))
    monkeypatch.setattr(exactly_once, "Admin", FakeAdmin({}, {}))
    with pytest.raises(RuntimeError, match=r"sql\.streaming\.queryId"):
        writer().write(iter([]))

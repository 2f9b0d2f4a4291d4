"""Goal: a replayed micro-batch's part that an earlier run committed is not written again,
whatever order its rows come back in. Without a `topic` option the rows name their topics, and
after a shuffle a task's rows need not come back in the same order: the replay's first row may
go to another topic than the earlier run's did. So every topic a part writes carries its batch
mark, and the look reads the group's offsets, waiting for a commit still applying them (also on
a partition the group had no offset of yet), and takes a group marked by the earlier sink (its
first row's topic only) too.

Method: ExactlyOnceStreamWriter's tasks and driver commit over a stand-in for the transaction
and group coordinators that keeps the commit's offsets pending until the group's coordinator
reads the marker, as Samsa's do (OffsetFetch with require_stable waits for a pending partition
it answers; a listing of all answers only partitions that hold an offset). The rows committed
are what a read_committed reader would see. Pure: no Spark session, no cluster."""

from __future__ import annotations

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

NAME = "spark-q-0"  # query q, task 0


class Coordinators:
    """One transactional id's transactions and one group's offsets (the task's)."""

    def __init__(self) -> None:
        self.committed: list[tuple[str, bytes]] = []  # what read_committed shows
        self.epoch, self.state = -1, "Empty"
        self.rows: list[tuple[str, bytes]] = []  # the open transaction's
        self.marks: dict[tuple[str, int], int] = {}  # its offsets
        self.offsets: dict[tuple[str, int], int] = {}
        self.pending: dict[tuple[str, int], int] = {}  # committed, marker not read yet

    def end(self, epoch: int, commit: bool) -> None:
        if epoch != self.epoch:
            raise TransactionError.of(ErrorCode.PRODUCER_FENCED, NAME)
        if self.state != "Ongoing":
            raise TransactionError.of(ErrorCode.INVALID_TXN_STATE, self.state)
        if commit:
            self.committed += self.rows
            self.pending |= self.marks
        self.state = "CompleteCommit" if commit else "CompleteAbort"
        self.rows, self.marks = [], {}

    def settle(self) -> None:
        """The group's coordinator reads the COMMIT marker: the offsets apply."""
        self.offsets |= self.pending
        self.pending = {}

    # Admin
    def __call__(self, config: dict) -> Coordinators:
        return self

    def __enter__(self) -> Coordinators:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def describe_transactions(self, names: list[str]) -> dict[str, TransactionDescription]:
        if self.epoch < 0:
            raise TransactionError.of(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, NAME)
        return {NAME: TransactionDescription(NAME, self.state, 7, self.epoch, 60_000, -1, ())}

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool) -> None:
        self.end(prepared.producer_epoch, commit)

    def list_consumer_group_offsets(
        self, group: str, partitions: list[tuple[str, int]] | None, require_stable: bool
    ) -> dict[tuple[str, int], OffsetAndMetadata]:
        assert group == NAME and require_stable
        answered = list(self.offsets) if partitions is None else partitions
        if any(tp in self.pending for tp in answered):
            self.settle()  # UNSTABLE_OFFSET_COMMIT, asked again until the marker is read
        return {tp: OffsetAndMetadata(self.offsets[tp]) for tp in answered if tp in self.offsets}


class Producer:
    """The task's transactional producer: what it sends lands in the open transaction."""

    cluster: Coordinators

    def __init__(self, config: dict) -> None:
        assert config["transactional.id"] == NAME

    def init_transactions(self) -> None:
        if self.cluster.state == "Ongoing":
            self.cluster.end(self.cluster.epoch, False)
        self.cluster.epoch += 1
        self.epoch = self.cluster.epoch

    def begin_transaction(self) -> None:
        self.cluster.state = "Ongoing"

    def send_many(self, topic, values, keys=None, headers=None, partitions=None):  # type: ignore[no-untyped-def]
        self.cluster.rows += [(topic, value) for value in values]
        return self

    def failed_count(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> None:
        pass

    def send_offsets_to_transaction(self, offsets: dict, group: str) -> None:
        assert group == NAME
        self.cluster.marks |= offsets

    def prepare_transaction(self) -> PreparedTransaction:
        return PreparedTransaction(NAME, 7, self.epoch)

    def close(self, timeout: float) -> None:
        pass


class Context:
    def __init__(self, batch: int) -> None:
        self.batch = batch

    def getLocalProperty(self, key: str) -> str:
        return {"sql.streaming.queryId": "q", "streaming.sql.batchId": str(self.batch)}[key]

    def partitionId(self) -> int:
        return 0

    def attemptNumber(self) -> int:
        return 0


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Coordinators:
    coordinators = Producer.cluster = Coordinators()
    monkeypatch.setattr(exactly_once, "Admin", coordinators)
    monkeypatch.setattr(exactly_once, "Producer", Producer)
    return coordinators


def run(monkeypatch: pytest.MonkeyPatch, batch: int, *rows: tuple[str, bytes]) -> None:
    """Task 0 of `batch` writes `rows` (topic, value), and the driver commits."""
    monkeypatch.setattr(exactly_once.TaskContext, "get", staticmethod(lambda: Context(batch)))
    topics, values = zip(*rows, strict=True)
    arrow = pa.record_batch({"topic": pa.array(topics), "value": pa.array(values, pa.binary())})
    writer = ExactlyOnceStreamWriter(WriteOptions({"bootstrap.servers": "h:1"}, None))
    message = writer.write(iter([arrow]))
    assert isinstance(message, TaskTransaction)
    writer.commit([message], batch)


@pytest.mark.parametrize("earlier", [False, True])
def test_a_replay_whose_rows_come_in_another_order_writes_nothing_again(
    monkeypatch: pytest.MonkeyPatch, cluster: Coordinators, earlier: bool
) -> None:
    """Batch 7's run committed its part, rows to a then b; the driver died before Spark's
    commit log; the replay's rows come b first. The look read b-0 only, which batch 7 never
    marked (or batch 6 had, `earlier`: 7, not past 7), and the part was written twice."""
    if earlier:
        run(monkeypatch, 6, ("b", b"old"))
    run(monkeypatch, 7, ("a", b"x"), ("b", b"y"))
    cluster.settle()
    run(monkeypatch, 7, ("b", b"y"), ("a", b"x"))
    written = [("a", b"x"), ("b", b"y")] + earlier * [("b", b"old")]
    assert sorted(cluster.committed) == sorted(written)


def test_a_replay_waits_for_a_commit_still_applying_a_new_partitions_offset(
    monkeypatch: pytest.MonkeyPatch, cluster: Coordinators
) -> None:
    """The earlier run's commit has ended (its driver was a zombie, or the group's coordinator
    has not read the marker yet) but its offsets are still pending, on partitions the group
    held none of: a listing of all the group's offsets shows nothing; asked by name, the
    replay's first topic waits for the marker."""
    run(monkeypatch, 0, ("a", b"x"), ("b", b"y"))
    run(monkeypatch, 0, ("b", b"y"), ("a", b"x"))
    assert sorted(cluster.committed) == [("a", b"x"), ("b", b"y")]


def test_a_group_the_earlier_sink_marked_on_its_first_topic_only_is_taken(
    monkeypatch: pytest.MonkeyPatch, cluster: Coordinators
) -> None:
    """A query that ran the sink before every topic was marked: batch 7 committed, its mark
    on a-0 only (its first row's topic); the replay comes b first, with this sink."""
    cluster.committed, cluster.offsets = [("a", b"x"), ("b", b"y")], {("a", 0): 8}
    cluster.epoch, cluster.state = 0, "CompleteCommit"
    run(monkeypatch, 7, ("b", b"y"), ("a", b"x"))
    assert sorted(cluster.committed) == [("a", b"x"), ("b", b"y")]
    run(monkeypatch, 8, ("b", b"z"))  # the next batch is written
    assert cluster.committed[-1] == ("b", b"z") and cluster.pending == {("b", 0): 9}

"""The exactly-once streaming sink: each micro-batch's rows become visible once, whatever fails.

Theory of operation (KIP-939's shape; issue 14). Task P of a micro-batch writes its rows in one
transaction under the transactional.id `spark-<query>-<P>`, the same in every micro-batch (the
query id is Spark's persistent one, kept in the checkpoint), and commits in it, as the offsets of
the group of the same name, the batch it writes: offset batch id + 1 on partition 0 of every
topic it wrote to (the coordinator takes offsets only of partitions that exist). So whether a
batch's part committed is read from the group's offsets, decided with the transaction, and a
query keeps one id and one group per task, however many batches it runs (Kafka Streams records
its input offsets in its transactions the same way). Spark replays a failed batch with the
same batch id and the same rows, though not always in the same order (after a shuffle): every
topic carries the mark, so the replay may look at the topic of its own first row. The task
writes, *prepares* (sends everything, leaves the transaction open) and reports the identity;
the driver's `commit(messages, batchId)` completes every task's transaction
(Admin.complete_transaction). What each failure does:

- a task fails after writing and is retried: the retry finds the failed attempt's transaction
  open and aborts it (EndTxn under the identity it was prepared with), then its
  init_transactions on the same id fences that attempt, and it writes again;
- the driver dies before its commit: the restarted query replays the batch; each task aborts
  what the dead run prepared in the same way, and writes again. Aborting it itself, before
  deciding, matters when that driver is not dead after all (a zombie): its commit and the
  task's abort meet at the coordinator, which takes one; a commit first refuses the abort, and
  the task then sees the part committed (left to init_transactions, the commit could land
  between the task's look and its fencing, and the part would be written twice);
- the driver dies during its commit (some transactions committed, the batch not marked done):
  on the replay a task reads its group's offsets with require_stable (a transaction still
  writing its markers is waited for); one past this batch means its part is visible, so the
  task writes nothing and reports it done;
- the commit fails part-way: Spark calls abort() with the same messages, which aborts every
  transaction still open (those committed stay so) and the restarted query replays the batch;
- nobody commits (the query is gone for good): the coordinator aborts the transactions at
  `transaction.timeout.ms` (option `samsa.transaction.timeout.ms`, 5 minutes by default; a
  micro-batch must end within it, or its commit fails naming the option).

Read with isolation.level=read_committed, the output holds every input row exactly once. A task
with no rows opens no transaction (nor looks: an earlier run of it had no rows either). The
replay's look relies on the group's offset, which the coordinators keep while the query runs
(offsets.retention.minutes counts from the last commit): a query restarted more than that after
its driver died mid-commit writes the committed parts of that batch again. Options: those of the
plain sink (sink.py), plus `exactlyOnce` (true by default for writeStream; false falls back to at
least once).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from samsa.client import Admin, Producer
from samsa.client.errors import KafkaError
from samsa.client.group_admin import TopicPartition
from samsa.client.transaction_admin import PreparedTransaction, TransactionError
from samsa.common.errors import ErrorCode
from samsa.common.tls import CLIENT_KEYS
from samsa.spark.sink import WriteOptions, check_producer_options, send_with

TRANSACTION_TIMEOUT_MS_DEFAULT = 300_000
# An abort refused with these has nothing to end: the transaction committed (the commit that
# failed part-way had ended it), or a newer instance of its id (or its timeout) aborted it.
ENDED_ALREADY = frozenset({ErrorCode.INVALID_TXN_STATE, ErrorCode.PRODUCER_FENCED})
# Test-only fault points (tests/spark): fail a task's first attempt after it prepared, or kill
# the driver between the tasks' writes and its commit (the commit runs in a Python worker, so
# the hook kills the process group the driver named in DRIVER_PROCESS_GROUP, then its own).
FAIL_TASK_AFTER_PREPARE = "SAMSA_SPARK_FAIL_TASK_AFTER_PREPARE"  # any value
EXIT_DRIVER_BEFORE_COMMIT = "SAMSA_SPARK_EXIT_DRIVER_BEFORE_COMMIT"  # a batch id
EXIT_DRIVER_MID_COMMIT = "SAMSA_SPARK_EXIT_DRIVER_MID_COMMIT"  # a batch id: after one completes
DRIVER_PROCESS_GROUP = "SAMSA_SPARK_DRIVER_PGID"


@dataclass
class TaskTransaction(WriterCommitMessage):
    """A task's part of a micro-batch: its prepared transaction, or None when there is nothing
    to complete (no rows, or already committed by an earlier run of this batch)."""

    transactional_id: str
    prepared: PreparedTransaction | None
    rows: int


def transactional_id(query_id: str, task: int) -> str:
    """The task's transactional id, and the group its batches are committed in."""
    return f"spark-{query_id}-{task}"


def transactional_config(client: dict[str, str], name: str) -> dict[str, object]:
    """A task's producer settings: the samsa.* options, transactional under `name`."""
    return {
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS_DEFAULT,
        **client,
        "transactional.id": name,
    }


# The sink's samsa.* keys (producer settings) that its Admin takes too, TLS's among them.
_ADMIN_KEYS = ("bootstrap.servers", "client.id", "request.timeout.ms", *CLIENT_KEYS)


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        # on the driver: what transactions need (idempotence, acks=all) before a task starts
        check_producer_options(
            transactional_config(options.client, "spark-options-check"),
            " (the exactly-once sink writes transactions, which need samsa.acks=all, "
            "samsa.enable.idempotence=true and samsa.retries > 0; or set exactlyOnce=false)",
        )
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        assert context is not None, "write() runs in a Spark task"
        query_id = context.getLocalProperty("sql.streaming.queryId")
        batch_id = context.getLocalProperty("streaming.sql.batchId")
        if not query_id or not batch_id:  # a made-up id would be shared with other queries
            raise RuntimeError(
                "the exactly-once sink runs in a streaming query's tasks, whose local properties "
                "sql.streaming.queryId and streaming.sql.batchId name its transactions: missing"
            )
        name = transactional_id(query_id, context.partitionId())
        first = next((batch for batch in iterator if batch.num_rows), None)
        if first is None:
            return TaskTransaction(name, None, 0)
        batch = int(batch_id)
        topic = self.options.topic or first.column("topic")[0].as_py()
        if topic is None:  # what send_with says of any row with no topic to go to
            raise KafkaError("row 0 has a null topic and the topic option is not set")
        with Admin(self._admin_config()) as admin:
            if _committed_before(admin, name, (topic, 0), batch):
                for _ in iterator:  # an earlier run of this batch committed this part
                    pass
                return TaskTransaction(name, None, 0)
        producer = Producer(transactional_config(self.options.client, name))
        topics: set[str] = set()
        try:
            producer.init_transactions()  # fences an earlier attempt, aborting what it left open
            producer.begin_transaction()
            batches = _noting_topics(self.options, chain((first,), iterator), topics)
            rows = send_with(producer, self.options, batches)
            marks = {(written, 0): batch + 1 for written in sorted(topics)}
            producer.send_offsets_to_transaction(marks, name)
            prepared = producer.prepare_transaction()
        except BaseException:
            producer.close(5)
            raise
        producer.close(5)
        if os.environ.get(FAIL_TASK_AFTER_PREPARE) and context.attemptNumber() == 0:
            raise RuntimeError(f"{FAIL_TASK_AFTER_PREPARE}: this attempt fails after writing")
        return TaskTransaction(name, prepared, rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit every task's prepared transaction. The first refusal raises (Spark then calls
        abort(), which ends the rest, and the restarted query replays the batch: each part
        already committed is skipped)."""
        if os.environ.get(EXIT_DRIVER_BEFORE_COMMIT) == str(batchId):
            _kill_driver()  # the driver dies between the tasks' writes and its commit
        mid = os.environ.get(EXIT_DRIVER_MID_COMMIT) == str(batchId)
        prepared = _prepared(messages)
        if not prepared:
            return
        with Admin(self._admin_config()) as admin:
            for transaction in prepared:
                try:
                    admin.complete_transaction(transaction, True)
                except TransactionError as error:
                    raise _not_committed(admin, transaction, batchId, error) from error
                if mid:
                    _kill_driver()  # the driver dies with part of the batch committed

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Abort every task's prepared transaction that is still open, then raise the first
        failure. Spark also calls this after a commit that failed part-way, with the same
        messages: a transaction that commit already committed stays committed (the replay skips
        its part), and every other one is still aborted, so that none holds back read_committed
        readers of the partitions it wrote until transaction.timeout.ms."""
        prepared = _prepared(messages)
        if not prepared:
            return
        failures: list[KafkaError] = []
        with Admin(self._admin_config()) as admin:
            for transaction in prepared:
                try:
                    admin.complete_transaction(transaction, False)
                except KafkaError as error:
                    if error.code not in ENDED_ALREADY:
                        failures.append(error)
        if failures:
            raise failures[0]

    def _admin_config(self) -> dict[str, str]:
        """The driver's and the tasks' Admin: the samsa.* keys an Admin shares with a producer
        (its timeouts otherwise the Admin's defaults)."""
        return {k: v for k, v in self.options.client.items() if k in _ADMIN_KEYS}


def _prepared(messages: list[WriterCommitMessage | None]) -> list[PreparedTransaction]:
    return [
        message.prepared
        for message in messages
        if isinstance(message, TaskTransaction) and message.prepared is not None
    ]


def _not_committed(
    admin: Admin, transaction: PreparedTransaction, batch_id: int, error: TransactionError
) -> TransactionError:
    """The commit's refusal in the sink's terms: which batch and task, and what to change when
    the coordinator had aborted the transaction (it outlived transaction.timeout.ms)."""
    name = transaction.transactional_id
    try:
        state = _state(admin, name)
    except KafkaError:
        state = None
    message = f"batch {batch_id}: the driver could not commit {name!r}, a task's transaction"
    if state in ("PrepareAbort", "CompleteAbort"):
        message += (
            " (the coordinator had aborted it: the micro-batch ran longer than "
            "transaction.timeout.ms, set by samsa.transaction.timeout.ms, "
            f"{TRANSACTION_TIMEOUT_MS_DEFAULT} ms unless set; raise it, or lower "
            "maxOffsetsPerTrigger)"
        )
    message += f"; the query replays the batch when it restarts: {error}"
    return TransactionError(message, error.code)


def _kill_driver() -> None:
    os.killpg(int(os.environ[DRIVER_PROCESS_GROUP]), signal.SIGKILL)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _noting_topics(
    options: WriteOptions, batches: Iterator[pa.RecordBatch], topics: set[str]
) -> Iterator[pa.RecordBatch]:
    """`batches`, adding to `topics` each topic their rows go to (send_with refuses a null)."""
    for batch in batches:
        if options.topic:
            topics.add(options.topic)
        else:
            topics.update(t for t in batch.column("topic").unique().to_pylist() if t is not None)
        yield batch


def _committed_before(admin: Admin, name: str, mark: TopicPartition, batch: int) -> bool:
    """Whether an earlier run of this batch committed this task's part: an offset of its group
    (the task's own, which only its batches commit, in order) is past `batch`. A part it
    prepared and left open is aborted first, with the identity it was prepared under: left to
    init_transactions, a driver of that run still alive (a zombie) could commit it between this
    look and the fencing, and the part would then be written twice. The coordinator orders the
    two EndTxns (a commit first refuses the abort), and require_stable waits for the one it
    took to reach the group's offsets; but a listing of all of them leaves out a partition the
    group holds no offset of yet, so `mark` (partition 0 of this replay's first topic, which
    the earlier run marked too: it marks every topic it wrote) is then asked by name. Any
    offset, not only `mark`'s: a group written before every topic was marked holds the mark on
    the earlier run's first topic only."""
    try:
        described = admin.describe_transactions([name])[name]
    except TransactionError as error:
        if error.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise
    else:
        if described.state == "Ongoing":
            prepared = PreparedTransaction(name, described.producer_id, described.producer_epoch)
            with contextlib.suppress(TransactionError):  # ended meanwhile: the offset says how
                admin.complete_transaction(prepared, False)
    committed = admin.list_consumer_group_offsets(name, None, require_stable=True)
    if mark not in committed:
        committed |= admin.list_consumer_group_offsets(name, [mark], require_stable=True)
    return any(offset.offset > batch for offset in committed.values())


def _state(admin: Admin, name: str) -> str | None:
    try:
        return admin.describe_transactions([name])[name].state
    except TransactionError as error:
        if error.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            return None
        raise

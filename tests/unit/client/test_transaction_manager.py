"""Goal: the transactional producer's state machine allows each call only where Kafka's does and
says what to do instead; a failed batch makes the transaction abortable (commit refused, abort
recovers), a fencing error is fatal for good, an ended transaction lets the next begin, and
close() aborts only a transaction left open.

Method: the pure TransactionManager driven through its calls, errors checked by code and words.
"""

from __future__ import annotations

import pytest

from samsa.client.errors import KafkaError
from samsa.client.transaction_manager import (
    TransactionAbortableError,
    TransactionFatalError,
    TransactionManager,
    TxnState,
)
from samsa.common.errors import ErrorCode


def ready() -> TransactionManager:
    manager = TransactionManager("tx")
    manager.check_init()
    manager.on_initialized()
    return manager


def test_the_happy_path_commits_then_aborts() -> None:
    manager = ready()
    manager.begin()
    manager.check_send()
    manager.begin_commit()
    manager.on_ended()
    assert manager.state is TxnState.READY
    manager.begin()
    manager.begin_abort()
    manager.on_ended()
    assert manager.state is TxnState.READY


@pytest.mark.parametrize(
    ("prepare", "call", "hint"),
    [
        (lambda m: None, "check_send", "init_transactions"),
        (lambda m: (m.check_init(), m.on_initialized()), "check_send", "begin_transaction"),
        (lambda m: (m.check_init(), m.on_initialized()), "begin_commit", "begin_transaction"),
        (lambda m: (m.check_init(), m.on_initialized(), m.begin()), "begin", "commit_transaction"),
        (lambda m: (m.check_init(), m.on_initialized(), m.begin()), "check_init", "commit"),
    ],
)
def test_misuse_is_refused_with_what_to_do(prepare, call: str, hint: str) -> None:  # type: ignore[no-untyped-def]
    manager = TransactionManager("tx")
    prepare(manager)
    with pytest.raises(KafkaError, match=hint) as refused:
        getattr(manager, call)()
    assert refused.value.code == ErrorCode.INVALID_TXN_STATE


def test_a_failed_batch_makes_the_transaction_abortable() -> None:
    manager = ready()
    manager.begin()
    manager.on_error(KafkaError("t-0 failed", ErrorCode.MESSAGE_TOO_LARGE))
    assert manager.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(KafkaError, match="abort_transaction") as refused:
        manager.begin_commit()
    assert refused.value.code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(KafkaError, match="abort_transaction"):
        manager.check_send()
    manager.begin_abort()
    manager.on_ended()
    assert manager.state is TxnState.READY and manager.error is None


def test_fencing_is_fatal_for_every_later_call() -> None:
    manager = ready()
    manager.begin()
    manager.on_error(KafkaError("fenced", ErrorCode.PRODUCER_FENCED))
    assert manager.state is TxnState.FATAL_ERROR
    for call in ("begin_commit", "begin_abort", "check_send", "begin", "check_init"):
        with pytest.raises(KafkaError, match="close it") as raised:
            getattr(manager, call)()
        assert raised.value.code == ErrorCode.PRODUCER_FENCED
    manager.on_error(KafkaError("later", ErrorCode.MESSAGE_TOO_LARGE))
    assert manager.state is TxnState.FATAL_ERROR, "nothing undoes a fence"


def test_a_commit_whose_end_timed_out_is_retried_not_aborted() -> None:
    """EndTxn's outcome is the coordinator's: after a retriable failure the same call is asked
    again (a retried EndTxn gets the first one's answer); aborting instead could contradict a
    commit the coordinator already decided."""
    manager = ready()
    manager.begin()
    manager.begin_commit()
    manager.on_end_failed(KafkaError("no coordinator", ErrorCode.COORDINATOR_NOT_AVAILABLE))
    assert manager.state is TxnState.COMMITTING
    manager.begin_commit()  # commit_transaction() again
    manager.on_ended()
    assert manager.state is TxnState.READY
    manager.begin()
    manager.begin_commit()
    manager.on_end_failed(KafkaError("bad", ErrorCode.INVALID_TXN_STATE))
    assert manager.state is TxnState.ABORTABLE_ERROR, "a non-retriable answer is the answer"


def test_a_prepared_transaction_is_someone_elses_to_complete() -> None:
    manager = ready()
    manager.begin()
    manager.begin_prepare()
    manager.on_prepared()
    assert manager.state is TxnState.PREPARED
    for call in ("begin_commit", "begin_abort", "check_send", "begin", "begin_prepare"):
        with pytest.raises(KafkaError, match=r"Admin\.complete_transaction"):
            getattr(manager, call)()
    failed = ready()
    failed.begin()
    failed.on_error(KafkaError("t-0 failed", ErrorCode.MESSAGE_TOO_LARGE))
    with pytest.raises(KafkaError, match="cannot be prepared"):
        failed.begin_prepare()


def test_a_transaction_being_prepared_refuses_sends_and_can_be_retried_or_aborted() -> None:
    """prepare_transaction() flushes, then hands the transaction over: a record sent meanwhile
    (another thread) would join the prepared transaction unseen, or sit unsent in it. Kafka's
    producer refuses send() once commitTransaction() began; so does prepare here."""
    manager = ready()
    manager.begin()
    manager.begin_prepare()
    assert manager.state is TxnState.PREPARING
    for call in ("check_send", "begin_commit", "begin"):
        with pytest.raises(KafkaError, match=r"let prepare_transaction\(\) finish") as refused:
            getattr(manager, call)()
        assert refused.value.code == ErrorCode.INVALID_TXN_STATE
    manager.begin_prepare()  # its flush timed out: prepare_transaction() is called again
    manager.on_error(KafkaError("t-0 failed", ErrorCode.MESSAGE_TOO_LARGE))  # a batch failed
    assert manager.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError, match="cannot be prepared"):
        manager.begin_prepare()
    manager.begin_abort()
    manager.on_ended()
    timed_out = ready()
    timed_out.begin()
    timed_out.begin_prepare()
    timed_out.begin_abort()  # given up after a timeout
    assert timed_out.state is TxnState.ABORTING


def test_a_transaction_is_started_once_a_request_of_it_leaves() -> None:
    """Only a started transaction needs EndTxn (the driver ends the others locally): started
    when a batch goes to a leader (which adds the partition) or offsets go to the coordinator,
    and not carried into the next transaction."""
    manager = ready()
    manager.begin()
    assert not manager.started
    manager.on_started()
    assert manager.started
    manager.begin_commit()
    manager.on_ended()
    manager.begin()
    assert not manager.started, "the next transaction starts unstarted"


def _in_state(state: TxnState) -> TransactionManager:
    """A manager brought to `state` through its calls (never by assignment)."""
    manager = TransactionManager("tx")
    if state is TxnState.UNINITIALIZED:
        return manager
    manager.check_init()
    manager.on_initialized()
    if state is TxnState.READY:
        return manager
    manager.begin()
    if state is TxnState.COMMITTING:
        manager.begin_commit()
    elif state is TxnState.ABORTING:
        manager.begin_abort()
    elif state is TxnState.ABORTABLE_ERROR:
        manager.on_error(KafkaError("t-0 failed", ErrorCode.MESSAGE_TOO_LARGE))
    elif state is TxnState.FATAL_ERROR:
        manager.on_error(KafkaError("fenced", ErrorCode.PRODUCER_FENCED))
    elif state is TxnState.PREPARING:
        manager.begin_prepare()
    elif state is TxnState.PREPARED:
        manager.begin_prepare()
        manager.on_prepared()
    assert manager.state is state
    return manager


# What close() does in each state: abort first, or leave the transaction as it is.
ABORTS_ON_CLOSE = {
    TxnState.UNINITIALIZED: False,
    TxnState.READY: False,
    TxnState.IN_TRANSACTION: True,
    TxnState.ABORTABLE_ERROR: True,
    TxnState.ABORTING: True,  # an abort that timed out: close() asks again
    TxnState.COMMITTING: False,  # a commit whose call failed: close() finishes it instead
    TxnState.FATAL_ERROR: False,  # fenced: the new instance already aborted it
    TxnState.PREPARING: True,  # a prepare that failed: never handed to anyone
    TxnState.PREPARED: False,  # another process completes it
}


def test_every_state_says_what_close_does() -> None:
    assert set(ABORTS_ON_CLOSE) == set(TxnState)


@pytest.mark.parametrize(("state", "aborts"), ABORTS_ON_CLOSE.items())
def test_close_aborts_only_a_transaction_left_open(state: TxnState, aborts: bool) -> None:
    """Kafka's producer aborts a transaction still open when it closes, so that read_committed
    readers of its partitions do not wait for transaction.timeout.ms."""
    manager = _in_state(state)
    assert manager.aborts_on_close() is aborts
    assert manager.commits_on_close() is (state is TxnState.COMMITTING)
    if aborts:
        manager.begin_abort()  # what close() does next is legal in every such state
        assert manager.state is TxnState.ABORTING


def test_an_abortable_error_is_never_retriable_even_when_its_cause_was() -> None:
    """A batch that failed with a retriable code (its delivery.timeout.ms passed) leaves a
    transaction that can only abort. commit_transaction() must not raise an error that says
    "retriable": the README (and confluent-kafka's retriable()) tells the caller to call commit
    again then, which raises the same error for ever. It says txn_requires_abort instead."""
    manager = ready()
    manager.begin()
    manager.on_error(KafkaError("t-0 expired", ErrorCode.REQUEST_TIMED_OUT))
    for call in ("begin_commit", "check_send", "begin_prepare"):
        with pytest.raises(TransactionAbortableError, match="abort_transaction") as refused:
            getattr(manager, call)()
        assert refused.value.code == ErrorCode.REQUEST_TIMED_OUT, "the cause's code is kept"
        assert not refused.value.retriable and refused.value.txn_requires_abort
        assert not refused.value.fatal


def test_a_fencing_error_says_fatal() -> None:
    manager = ready()
    manager.begin()
    manager.on_error(KafkaError("fenced", ErrorCode.INVALID_PRODUCER_EPOCH))
    with pytest.raises(TransactionFatalError) as raised:
        manager.begin_commit()
    assert raised.value.fatal and not raised.value.retriable
    assert not raised.value.txn_requires_abort


def test_a_failed_end_or_offsets_call_raises_what_it_left_behind() -> None:
    """EndTxn or the offsets calls failing: the caller raises `to_raise`, which says whether to
    call again (the cause, retriable), abort (abortable) or close (fatal)."""
    manager = ready()
    manager.begin()
    manager.begin_commit()
    timed_out = KafkaError("no coordinator", ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert manager.on_end_failed(timed_out) is timed_out and timed_out.retriable
    refused = manager.on_end_failed(KafkaError("bad", ErrorCode.INVALID_TXN_STATE))
    assert isinstance(refused, TransactionAbortableError) and refused.txn_requires_abort
    assert refused.code == ErrorCode.INVALID_TXN_STATE
    manager.begin_abort()
    fenced = manager.on_end_failed(KafkaError("fenced", ErrorCode.PRODUCER_FENCED))
    assert isinstance(fenced, TransactionFatalError) and fenced.fatal
    assert fenced.code == ErrorCode.PRODUCER_FENCED
    offsets = ready()
    offsets.begin()
    lost = KafkaError("member gone", ErrorCode.UNKNOWN_MEMBER_ID)
    offsets.on_error(lost)
    assert isinstance(offsets.to_raise(lost), TransactionAbortableError)

"""The transactional producer's state machine (Kafka's TransactionManager, transactions version
2), pure: which call is legal when, and what an error leaves behind.

    UNINITIALIZED --init_transactions--> READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING --(EndTxn answered)--> READY
    IN_TRANSACTION / ABORTABLE_ERROR --abort_transaction--> ABORTING --(EndTxn)--> READY
    any --fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)--> FATAL_ERROR
    COMMITTING / ABORTING --EndTxn timed out (retriable)--> the same: call it again
    IN_TRANSACTION --prepare_transaction--> PREPARING --(flushed)--> PREPARED: another process
        completes it; PREPARING refuses send() (a record sent meanwhile would join the prepared
        transaction unseen), a timed-out prepare_transaction() is called again or aborted
    IN_TRANSACTION / PREPARING / ABORTABLE_ERROR / ABORTING --close()--> ABORTING --(EndTxn)-->
        READY

An *abortable* error (a batch of the transaction failed, or its leader could not add its
partition to the transaction) leaves the transaction unable to commit: commit_transaction raises
it (TransactionAbortableError), abort_transaction recovers. A *fatal* error (another instance with
the same transactional.id fenced this one) ends the producer: every call raises it
(TransactionFatalError). Both keep the code of their cause but are never `retriable`, whatever
that cause was: calling the same method again cannot help (confluent-kafka's
`txn_requires_abort()` and `fatal()`, here attributes). The driver does the I/O
(transaction_client.py); this module only decides.
"""

from __future__ import annotations

import enum

from samsa.client.errors import AUTHORIZATION_CODES, KafkaError
from samsa.common.errors import ErrorCode


class TransactionAbortableError(KafkaError):
    """The transaction failed (the message says how, the code is its cause's) and can only be
    aborted: call abort_transaction(). Not retriable, even when its cause was (a batch past
    delivery.timeout.ms): the same call raises it again until the abort."""

    txn_requires_abort = True
    fatal = False

    @property
    def retriable(self) -> bool:
        return False


class TransactionFatalError(KafkaError):
    """This producer was fenced (another instance of its transactional.id took over): every
    call raises this; close the producer."""

    txn_requires_abort = False
    fatal = True

    @property
    def retriable(self) -> bool:
        return False


# Errors after which this producer instance can never write again.
FATAL_ERRORS = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
        # Refused by the ACLs (Kafka's TransactionManager makes these fatal; a topic's or a
        # group's refusal is abortable: the transaction aborts, the producer goes on).
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    }
)


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in a transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "failed (abort the transaction)"
    FATAL_ERROR = "fenced"
    PREPARING = "preparing"
    PREPARED = "prepared (another process completes it)"


# TxnState.IN_TRANSACTION read once: an Enum member read off its class costs CPython 3.11 about
# 0.1 µs each time, and check_send() runs for every record (the whole old check was ~0.3 µs a
# record, ~15 % of a transactional producer's send()).
_IN_TRANSACTION = TxnState.IN_TRANSACTION
# Still open, not handed to anyone: close() aborts it (a prepare that never finished included).
_ABORTED_ON_CLOSE = frozenset(
    {TxnState.IN_TRANSACTION, TxnState.PREPARING, TxnState.ABORTABLE_ERROR, TxnState.ABORTING}
)

HINTS = {
    TxnState.UNINITIALIZED: "call init_transactions() first",
    TxnState.READY: "call begin_transaction() first",
    TxnState.IN_TRANSACTION: "commit_transaction() or abort_transaction() first",
    TxnState.COMMITTING: "let commit_transaction() finish (call it again after a timeout)",
    TxnState.ABORTING: "let abort_transaction() finish (call it again after a timeout)",
    TxnState.ABORTABLE_ERROR: "call abort_transaction()",
    TxnState.FATAL_ERROR: "close this producer",
    TxnState.PREPARING: "let prepare_transaction() finish (call it again after a timeout), or "
    "call abort_transaction()",
    TxnState.PREPARED: "complete it with Admin.complete_transaction, and close this producer",
}


class TransactionManager:
    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = TxnState.UNINITIALIZED
        self.error: KafkaError | None = None
        # Whether the transaction must end with an EndTxn: a batch of it was drained (so it
        # may reach a leader, which adds its partition, and it took sequences that only the
        # epoch EndTxn brings resets, sent or not) or its offsets were added. If not, it ends
        # locally.
        self.started = False

    def _require(self, action: str, *allowed: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state not in allowed:
            names = " or ".join(state.value for state in allowed)
            raise KafkaError(
                f"{action}: the producer of transactional.id {self.transactional_id!r} is "
                f"{self.state.value}, and this is allowed only when {names}: "
                f"{HINTS[self.state]}",
                ErrorCode.INVALID_TXN_STATE,
            )

    # --- the calls ----------------------------------------------------------------------------

    def check_init(self) -> None:
        self._require("init_transactions", TxnState.UNINITIALIZED, TxnState.READY)

    def on_initialized(self) -> None:
        self.state = TxnState.READY

    def begin(self) -> None:
        self._require("begin_transaction", TxnState.READY)
        self.state = TxnState.IN_TRANSACTION

    def check_send(self) -> None:
        """send() and send_offsets_to_transaction() need an open transaction. Run for every
        record, so the open transaction is one comparison with a module constant."""
        if self.state is _IN_TRANSACTION:
            return
        if self.state is TxnState.ABORTABLE_ERROR:
            assert self.error is not None
            raise TransactionAbortableError(
                f"the transaction failed ({self.error}): call abort_transaction()",
                self.error.code,
            )
        self._require("send", TxnState.IN_TRANSACTION)

    def begin_commit(self) -> None:
        if self.state is TxnState.ABORTABLE_ERROR:
            assert self.error is not None
            raise TransactionAbortableError(
                f"the transaction cannot commit ({self.error}): call abort_transaction()",
                self.error.code,
            )
        self._require("commit_transaction", TxnState.IN_TRANSACTION, TxnState.COMMITTING)
        self.state = TxnState.COMMITTING

    def begin_prepare(self) -> None:
        """prepare_transaction(): like a commit's start, the transaction must not have failed."""
        if self.state is TxnState.ABORTABLE_ERROR:
            assert self.error is not None
            raise TransactionAbortableError(
                f"the transaction cannot be prepared ({self.error}): call abort_transaction()",
                self.error.code,
            )
        self._require("prepare_transaction", TxnState.IN_TRANSACTION, TxnState.PREPARING)
        self.state = TxnState.PREPARING

    def on_started(self) -> None:
        """A batch of the transaction was drained, or a request left for the coordinator."""
        self.started = True

    def on_prepared(self) -> None:
        """Everything of the transaction is written: it is someone else's to complete now."""
        assert self.state is TxnState.PREPARING, self.state
        self.state = TxnState.PREPARED

    def begin_abort(self) -> None:
        self._require(
            "abort_transaction",
            TxnState.IN_TRANSACTION,
            TxnState.PREPARING,
            TxnState.ABORTABLE_ERROR,
            TxnState.ABORTING,
        )
        self.state = TxnState.ABORTING

    def aborts_on_close(self) -> bool:
        """Whether close() must abort the transaction first, as Kafka's producer does: one still
        open (or failed, or being aborted) would otherwise hold back read_committed readers of
        its partitions until transaction.timeout.ms. A commit in progress is finished instead
        (commits_on_close), and a prepared transaction is another process's to complete."""
        return self.state in _ABORTED_ON_CLOSE

    def commits_on_close(self) -> bool:
        """Whether close() must finish a commit first: commit_transaction() failed retriably (a
        timeout), so its EndTxn may never have left, and the transaction would stay open until
        transaction.timeout.ms. Kafka's producer completes a commit in progress when it closes."""
        return self.state is TxnState.COMMITTING

    def on_ended(self) -> None:
        """EndTxn answered: the next transaction may begin."""
        assert self.state in (TxnState.COMMITTING, TxnState.ABORTING), self.state
        self.state = TxnState.READY
        self.error = None
        self.started = False

    # --- errors -------------------------------------------------------------------------------

    def on_end_failed(self, error: KafkaError) -> KafkaError:
        """EndTxn failed. A retriable error (the coordinator moved, the call timed out) leaves
        the commit or abort in progress: its outcome is the coordinator's, and calling the same
        method again asks for it (a retried EndTxn is answered as the first, KIP-890). Anything
        else is as on_error. Returns the error for the caller to raise (`to_raise`)."""
        if error.retriable and self.state in (TxnState.COMMITTING, TxnState.ABORTING):
            return error
        self.on_error(error)
        return self.to_raise(error)

    def to_raise(self, error: KafkaError) -> KafkaError:
        """What a call that failed with `error` (after on_error) raises: the fencing error once
        fatal, an abortable error once the transaction can only abort, else `error` itself."""
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            return self.error
        if self.state is TxnState.ABORTABLE_ERROR and self.error is error:
            return TransactionAbortableError(
                f"the transaction failed ({error}): call abort_transaction()", error.code
            )
        return error

    def on_error(self, error: KafkaError) -> None:
        """A batch or a request of the transaction failed with `error`."""
        if self.state is TxnState.FATAL_ERROR:
            return
        if error.code in FATAL_ERRORS:
            self.state = TxnState.FATAL_ERROR
            why = "was refused by the ACLs" if error.code in AUTHORIZATION_CODES else "was fenced"
            self.error = TransactionFatalError(
                f"this producer of transactional.id {self.transactional_id!r} {why} "
                f"({error}); close it",
                error.code,
            )
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.PREPARING):
            self.state = TxnState.ABORTABLE_ERROR
            self.error = error

    @property
    def in_transaction(self) -> bool:
        return self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.PREPARING,
            TxnState.COMMITTING,
            TxnState.ABORTING,
        )

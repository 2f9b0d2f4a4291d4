"""Aborting a hanging transaction (KIP-664), the pure half: whether an ABORT marker may be written.

Theory of operation. A hanging transaction is an open transaction on a partition that no
coordinator will ever end (say its markers were lost): it holds the partition's last stable
offset back, so every read_committed reader stalls there. An operator names it as the
partition leader's DescribeProducers shows it (producer id and epoch), and any coordinator
checks the leader's answer with `abort_decision` before writing the marker
(transaction_servicer.py does the I/O):

- the producer must have an open transaction on the partition, at the epoch named: anything
  else means the operator looks at stale output, and the abort is refused (INVALID_TXN_STATE);
- its last write there must be at least transaction.max.timeout.ms old. A transaction its
  coordinator knows is aborted by that coordinator within the producer's transaction.timeout.ms
  (at most transaction.max.timeout.ms), and the transaction's first write to the partition came
  after it began; so only then is it surely hanging. A more recent one is refused with
  CONCURRENT_TRANSACTIONS: not yet, retry later if it still hangs. The age is the leader's
  `last_append_age_ms`, measured by the leader's own clock from its last append of the
  producer's batch or marker there (services/broker/log/producer_entry.py), never the record
  timestamps (`last_timestamp_ms`): those are the producer's to choose under CreateTime, and a
  live transaction stamping an old time would pass at once, its ABORT marker would land, and its
  coordinator's COMMIT would then be refused there (INVALID_PRODUCER_EPOCH): a committed
  transaction with that partition's records aborted. An age, not a time, so that no clock is
  compared with another machine's; where the leader does not know it (after a restart or
  truncation replayed the batches) it reads young, which only delays the abort.
- the marker carries epoch + 1: a marker must be above the producer's epoch on the partition
  (KIP-890, producer_state.py), and a producer at PRODUCER_EPOCH_MAX cannot have one.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.transaction_model import PRODUCER_EPOCH_MAX
from samsa.v1 import broker_pb2

ProducerState = broker_pb2.DescribeProducersResponse.ProducerState
NO_TXN_START_OFFSET = -1  # DescribeProducers' current_txn_start_offset when none is open


class AbortRefused(NamedTuple):
    code: ErrorCode
    message: str  # says why, and what the operator should do


class AbortMarker(NamedTuple):
    """Write an ABORT marker for this producer at this epoch to the partition."""

    producer_id: int
    marker_epoch: int
    txn_start_offset: int  # where the aborted transaction began, for the log line


def request_problem(
    topic: str, partition: int, producer_id: int, producer_epoch: int
) -> str | None:
    """Why an AbortTransaction request is malformed, or None."""
    if not topic:
        return "topic must not be empty"
    if partition < 0:
        return f"partition {partition} is negative"
    if producer_id < 0:
        return f"producer_id {producer_id} is negative: pass the one DescribeProducers shows"
    if not 0 <= producer_epoch <= PRODUCER_EPOCH_MAX:
        return f"producer_epoch {producer_epoch} is outside 0..{PRODUCER_EPOCH_MAX}"
    return None


def abort_decision(
    where: str,
    producers: Iterable[ProducerState],
    *,
    producer_id: int,
    producer_epoch: int,
    max_timeout_ms: int,
) -> AbortRefused | AbortMarker:
    """Whether to abort `producer_id`'s open transaction on the partition `where` ("topic-N"),
    given the leader's producers there (see the module docstring)."""
    assert max_timeout_ms > 0, max_timeout_ms
    state = next((p for p in producers if p.producer_id == producer_id), None)
    if state is None or state.current_txn_start_offset == NO_TXN_START_OFFSET:
        known = "does not know the producer" if state is None else "shows no open transaction"
        return AbortRefused(
            ErrorCode.INVALID_TXN_STATE,
            f"producer {producer_id} has no open transaction on {where} (its leader {known}): "
            "nothing to abort",
        )
    if state.producer_epoch != producer_epoch:
        return AbortRefused(
            ErrorCode.INVALID_TXN_STATE,
            f"producer {producer_id}'s open transaction on {where} is at epoch "
            f"{state.producer_epoch}, not {producer_epoch}: describe the partition's producers "
            "again and pass the epoch shown",
        )
    if state.producer_epoch >= PRODUCER_EPOCH_MAX:
        return AbortRefused(
            ErrorCode.INVALID_TXN_STATE,
            f"producer {producer_id} is at epoch {PRODUCER_EPOCH_MAX} on {where}: an ABORT marker "
            "must carry a higher epoch, and there is none",
        )
    silent_ms = state.last_append_age_ms
    if silent_ms < max_timeout_ms:
        return AbortRefused(
            ErrorCode.CONCURRENT_TRANSACTIONS,
            f"producer {producer_id} last wrote to {where} {silent_ms} ms ago by its leader's "
            "clock, within "
            f"transaction.max.timeout.ms ({max_timeout_ms} ms): its coordinator may still end "
            f"the transaction; if it still hangs, retry in {max_timeout_ms - silent_ms} ms",
        )
    return AbortMarker(producer_id, producer_epoch + 1, state.current_txn_start_offset)

"""Producer id blocks: which ids a broker may hand to idempotent producers (KIP-730).

Theory of operation. Brokers answer InitProducerId from a block of ids they own; they take blocks
from the active controller with AllocateProducerIds. The image holds `next_producer_id`, the first
id no block holds yet. A request from a broker's current registration (id and epoch) is answered
with [next_producer_id, next_producer_id + block size), decided against the committed image and
answered only once its ProducerIdsRecord (next_producer_id + block size) is committed, like every
controller write. Invariants:

- blocks never overlap: each record moves `next_producer_id` strictly up (replay refuses any other)
  and the driver generates one write at a time against the committed image, so two answers can
  never start at the same id;
- failover cannot repeat an id: the next id lives in the replicated log, and a new active
  controller decides only once its image holds every committed record (its barrier entry);
- a stale or unknown broker (STALE_BROKER_EPOCH) gets nothing, so a zombie process of an earlier
  incarnation does not consume blocks under the live broker's name.
"""

from __future__ import annotations

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller.control_result import ControlResult
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# The largest value of ProducerIdsRecord.next_producer_id (int64): the last id handed out is one
# below it.
NEXT_PRODUCER_ID_MAX = 2**63 - 1


def allocate_producer_ids(
    image: MetadataImage,
    request: c.AllocateProducerIdsRequest,
    *,
    block_size: int = limits.producer_id_block_size,
) -> ControlResult[c.AllocateProducerIdsResponse]:
    """The next block of `block_size` ids for the asking broker, or a refusal with no record."""
    assert block_size > 0
    broker = image.brokers.get(request.broker_id)
    if broker is None or broker.broker_epoch != request.broker_epoch:
        return _refused(
            ErrorCode.STALE_BROKER_EPOCH,
            f"broker {request.broker_id} epoch {request.broker_epoch} is not current "
            f"({'unregistered' if broker is None else broker.broker_epoch}): register again",
        )
    start = image.next_producer_id
    if start > NEXT_PRODUCER_ID_MAX - block_size:
        return _refused(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"every producer id below {NEXT_PRODUCER_ID_MAX} has been handed out",
        )
    record = m.ProducerIdsRecord(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        next_producer_id=start + block_size,
    )
    response = c.AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=block_size)
    return ControlResult([m.MetadataRecord(producer_ids=record)], response)


def _refused(code: ErrorCode, message: str) -> ControlResult[c.AllocateProducerIdsResponse]:
    response = c.AllocateProducerIdsResponse(producer_id_start=-1, producer_id_len=0)
    response.status.error_code = code  # type: ignore[assignment]
    response.status.error_message = message
    return ControlResult([], response)

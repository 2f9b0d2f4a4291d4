"""Client quota decisions: AlterClientQuotas (KIP-546; user, client-id and pair entities).

Theory of operation. A quota is metadata like a topic config: the active controller validates
each entry of the request against Kafka's rules and answers it, and commits one
ClientQuotaRecord per key that changes (metadata/client_quotas.py keeps them in the image and
says how a client's quota resolves). Every broker learns them by following the metadata log and
throttles from its own image (services/broker/quotas.py); nothing else is told.

Each entry (one entity and its operations) succeeds or fails on its own, its operations all or none,
as Kafka's ClientQuotaControlManager answers per entity. Refused with INVALID_REQUEST, as Kafka
refuses them: an entity that names no user and no client.id (or an empty or over-long name, or a
user given as a principal, `User:alice` for `alice`), an unknown key (Kafka's request_percentage and
controller_mutation_rate included: Samsa has no request-time or controller-mutation quotas), a value
that is not a whole number > 0 (Kafka's byte rates are LONG configs), a key changed twice in one
entry, and an entity named twice in the request (both entries are refused: applied in order they
could leave a state no check saw). An operation that changes nothing (a removal of a key not set, a
value already set) commits nothing. DescribeClientQuotas is a plain read of the image:
services/runtime/metadata_reads.py. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter

from samsa.common.errors import ErrorCode
from samsa.metadata.client_quotas import (
    InvalidEntityError,
    QuotaEntity,
    entity_key,
    entity_message,
    entity_name,
    quota_value_problem,
)
from samsa.metadata.image import MetadataImage
from samsa.services.controller.control_result import ControlResult
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

Refusal = tuple[ErrorCode, str]


def alter_client_quotas(
    image: MetadataImage, request: c.AlterClientQuotasRequest
) -> ControlResult[c.AlterClientQuotasResponse]:
    """Each entry's ClientQuotaRecords, or its refusal (see the module doc)."""
    response = c.AlterClientQuotasResponse()
    keys: list[QuotaEntity | InvalidEntityError] = []
    for entry in request.entries:
        try:
            keys.append(entity_key(entry.entity))
        except InvalidEntityError as error:
            keys.append(error)
    named = Counter(key for key in keys if not isinstance(key, InvalidEntityError))
    records: list[m.MetadataRecord] = []
    for entry, key in zip(request.entries, keys, strict=True):
        result = response.results.add()
        result.entity.CopyFrom(entry.entity)
        if isinstance(key, InvalidEntityError):
            outcome: list[m.MetadataRecord] | Refusal = (ErrorCode.INVALID_REQUEST, str(key))
        elif named[key] > 1:
            outcome = (ErrorCode.INVALID_REQUEST, f"{entity_name(key)} is named twice")
        else:
            outcome = _alter_entity(image, key, entry.ops)
        if isinstance(outcome, tuple):
            result.error_code, result.error_message = outcome  # type: ignore[assignment]
        elif not request.validate_only:
            records += outcome
    return ControlResult(records, response)


def _alter_entity(
    image: MetadataImage, key: QuotaEntity, ops: list[c.AlterClientQuotasRequest.Op]
) -> list[m.MetadataRecord] | Refusal:
    """The records that apply `ops` to the entity `key`, or why they are refused."""
    where = entity_name(key)
    twice = sorted(name for name, count in Counter(op.key for op in ops).items() if count > 1)
    if twice:
        return ErrorCode.INVALID_REQUEST, f"{where}: {', '.join(twice)} is changed twice"
    current = image.client_quotas.get(key, {})
    records = []
    for op in ops:
        problem = quota_value_problem(op.key, 1.0 if op.remove else op.value)
        if problem is not None:
            return ErrorCode.INVALID_REQUEST, f"{where}: {problem}"
        record = m.ClientQuotaRecord(entity=entity_message(key), key=op.key)
        if op.remove:
            if op.key not in current:
                continue
        elif current.get(op.key) == op.value:
            continue
        else:
            record.value = op.value
        records.append(m.MetadataRecord(client_quota=record))
    return records

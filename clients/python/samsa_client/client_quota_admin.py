"""Admin's client quota calls, the pure half: AlterClientQuotas and DescribeClientQuotas
requests from Python values, and the answers back (KIP-546's API, client-id entities only).

An entity is a client.id (a non-empty string) or None, the default entity (Kafka's
`--entity-default`: every client without a value of its own for the key). Quotas are byte rates
per broker, keyed by Kafka's names, producer_byte_rate and consumer_byte_rate; the controller
checks the keys and values (whole numbers > 0) and answers INVALID_REQUEST per entity. Pure:
admin.py sends the requests.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.metadata.client_quotas import entity_name
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# An entity's quotas to change: key -> a value to set, or None to remove the key.
QuotaChanges = Mapping[str, float | None]


def entity_of(client_id: str | None) -> m.ClientQuotaEntity:
    """The entity of a client.id, or the default entity for None; ValueError for ""."""
    if client_id is None:
        return m.ClientQuotaEntity(default_client=True)
    if not isinstance(client_id, str) or not client_id:
        raise ValueError(
            f"a client quota names a non-empty client.id, or None for the default entity, not "
            f"{client_id!r}"
        )
    return m.ClientQuotaEntity(client_id=client_id)


def alter_quotas_request(
    alterations: Mapping[str | None, QuotaChanges], validate_only: bool
) -> c.AlterClientQuotasRequest:
    """The request that sets (a number) or removes (None) each entity's keys."""
    request = c.AlterClientQuotasRequest(validate_only=validate_only)
    for client_id, changes in alterations.items():
        entry = request.entries.add(entity=entity_of(client_id))
        for key, value in changes.items():
            if value is None:
                entry.ops.add(key=key, remove=True)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                entry.ops.add(key=key, value=float(value))
            else:
                raise ValueError(f"quota {key} of {entity_name(client_id)}: {value!r} is no number")
    return request


def raise_first_refusal(response: c.AlterClientQuotasResponse) -> None:
    """KafkaError for the first entity refused, named (the others were applied)."""
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            entity = result.entity
            name = entity_name(None if entity.default_client else entity.client_id)
            error = KafkaError.of(result.error_code, result.error_message)
            raise KafkaError(f"{name}: {error}", error.code)


def describe_quotas_request(
    client_id: str | None, default: bool, min_metadata_offset: int
) -> c.DescribeClientQuotasRequest:
    """Every entity (neither given), one client.id's, or the default entity's (`default`)."""
    if client_id is not None and default:
        raise ValueError("describe one client.id or the default entity, not both")
    request = c.DescribeClientQuotasRequest(min_metadata_offset=min_metadata_offset)
    if client_id is not None or default:
        request.entity.CopyFrom(entity_of(None if default else client_id))
    return request


def quotas_of(response: c.DescribeClientQuotasResponse) -> dict[str | None, dict[str, float]]:
    """Each entity's quotas, None for the default entity, in the answer's order (the default
    first, then by client.id)."""
    return {
        (None if entry.entity.default_client else entry.entity.client_id): dict(entry.values)
        for entry in response.entries
    }

"""Admin's client quota calls, the pure half: AlterClientQuotas and DescribeClientQuotas
requests from Python values, and the answers back (KIP-546's API).

An entity is a `QuotaEntity(user, client_id)`, each part a name, QuotaEntity.DEFAULT (Kafka's
`--user-defaults` / `--client-defaults`) or None (not part of the entity); a plain client.id
string, or None for the default client, stands for the client-only entity, as before users
came. Quotas are byte rates per broker, keyed by Kafka's names, producer_byte_rate and
consumer_byte_rate; the controller checks the entities, keys and values (whole numbers > 0) and
answers INVALID_REQUEST per entity. Pure: admin.py sends the requests.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.metadata.client_quotas import (
    DEFAULT,
    DEFAULT_CLIENT,
    InvalidEntityError,
    QuotaEntity,
    entity_key,
    entity_message,
    entity_name,
)
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# An entity's quotas to change: key -> a value to set, or None to remove the key.
QuotaChanges = Mapping[str, float | None]
# What names an entity: a QuotaEntity, or a client.id (None: the default client).
EntityLike = QuotaEntity | str | None


def entity_of(entity: EntityLike) -> m.ClientQuotaEntity:
    """The message of an entity; ValueError saying what to fix when it names none or a bad name."""
    if entity is None:
        entity = DEFAULT_CLIENT
    elif isinstance(entity, str):
        entity = QuotaEntity(client_id=entity)
    if not isinstance(entity, QuotaEntity):
        raise ValueError(
            f"a quota entity is a QuotaEntity, a client.id or None (the default client), not "
            f"{entity!r}"
        )
    for part in entity:
        if part is not None and part is not DEFAULT and not isinstance(part, str):
            raise ValueError(f"{entity!r}: each part is a name, QuotaEntity.DEFAULT or None")
    message = entity_message(entity)
    try:
        entity_key(message)
    except InvalidEntityError as error:
        raise ValueError(f"{entity!r}: {error}") from None
    return message


def alter_quotas_request(
    alterations: Mapping[EntityLike, QuotaChanges], validate_only: bool
) -> c.AlterClientQuotasRequest:
    """The request that sets (a number) or removes (None) each entity's keys."""
    request = c.AlterClientQuotasRequest(validate_only=validate_only)
    for entity, changes in alterations.items():
        entry = request.entries.add(entity=entity_of(entity))
        for key, value in changes.items():
            if value is None:
                entry.ops.add(key=key, remove=True)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                entry.ops.add(key=key, value=float(value))
            else:
                name = entity_name(entity_key(entry.entity))
                raise ValueError(f"quota {key} of {name}: {value!r} is no number")
    return request


def raise_first_refusal(response: c.AlterClientQuotasResponse) -> None:
    """KafkaError for the first entity refused, named (the others were applied)."""
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            try:
                name = entity_name(entity_key(result.entity))
            except InvalidEntityError:
                name = "an entity"
            error = KafkaError.of(result.error_code, result.error_message)
            raise KafkaError(f"{name}: {error}", error.code)


def describe_quotas_request(
    user: str | None,
    default_user: bool,
    client_id: str | None,
    default_client: bool,
    min_metadata_offset: int,
) -> c.DescribeClientQuotasRequest:
    """Every entity (no part given), or the one entity the parts name exactly."""
    if user is not None and default_user:
        raise ValueError("describe one user or the default user, not both")
    if client_id is not None and default_client:
        raise ValueError("describe one client.id or the default client, not both")
    request = c.DescribeClientQuotasRequest(min_metadata_offset=min_metadata_offset)
    entity = QuotaEntity(
        DEFAULT if default_user else user, DEFAULT if default_client else client_id
    )
    if entity != QuotaEntity():
        request.entity.CopyFrom(entity_of(entity))
    return request


def quotas_of(response: c.DescribeClientQuotasResponse) -> dict[QuotaEntity, dict[str, float]]:
    """Each entity's quotas, in the answer's order (client_quotas.entity_order)."""
    return {entity_key(entry.entity): dict(entry.values) for entry in response.entries}

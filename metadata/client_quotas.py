"""Client quotas (KIP-13) in the metadata image: entities, keys, and which quota a client gets.

Theory of operation. A quota applies to an *entity*: one client.id, or the default entity (Kafka's
`--entity-default`), which stands for every client whose client.id has no value of its own for
the key, clients that send no client.id included. The image keeps them as
`MetadataImage.client_quotas`: entity → {key: bytes per second}, the default entity under the key
`DEFAULT_ENTITY` (None, so that no client.id can be mistaken for it). `quota_for` resolves a
client's quota as Kafka does for client-id quotas: its own entry, else the default entity's,
else none. Samsa has no authentication, so user and (user, client-id) entities, Kafka's
request_percentage and controller_mutation_rate are not kept. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from samsa.common import limits
from samsa.v1 import metadata_pb2

# Kafka's names: bytes per second a client may produce, and may fetch, per broker.
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)

# The gRPC metadata key a client sends its client.id under: the SDK sets it on each stream as it
# opens and on unary calls; brokers read it only while some quota is set
# (services/broker/quotas.py).
CLIENT_ID_METADATA_KEY = "samsa-client-id"

# The default entity's key in MetadataImage.client_quotas.
DEFAULT_ENTITY = None

EntityKey = str | None  # a client.id, or DEFAULT_ENTITY
ClientQuotas = Mapping[EntityKey, Mapping[str, float]]

# The largest value a quota may take: what an int64 holds exactly as a double (Kafka's
# producer_byte_rate and consumer_byte_rate are LONG configs).
QUOTA_VALUE_MAX = float(2**53)


class InvalidEntityError(ValueError):
    """A ClientQuotaEntity that names neither a client.id nor the default entity, or a bad id."""


def entity_key(entity: metadata_pb2.ClientQuotaEntity) -> EntityKey:
    """The image's key of `entity`; InvalidEntityError with what to fix when it is not one."""
    kind = entity.WhichOneof("entity")
    if kind == "default_client" and entity.default_client:
        return DEFAULT_ENTITY
    if kind == "client_id":
        problem = client_id_problem(entity.client_id)
        if problem is not None:
            raise InvalidEntityError(problem)
        return entity.client_id
    raise InvalidEntityError("an entity names a client_id or sets default_client")


def entity_message(key: EntityKey) -> metadata_pb2.ClientQuotaEntity:
    """The ClientQuotaEntity of an image key."""
    if key is DEFAULT_ENTITY:
        return metadata_pb2.ClientQuotaEntity(default_client=True)
    return metadata_pb2.ClientQuotaEntity(client_id=key)


def entity_name(key: EntityKey) -> str:
    """How a person reads the entity (messages, the CLI)."""
    return "the default client entity" if key is DEFAULT_ENTITY else f"client.id {key!r}"


def client_id_problem(client_id: str) -> str | None:
    """Why `client_id` cannot name a quota entity, or None."""
    if not client_id:
        return (
            "a client.id entity needs a non-empty id (the default entity covers clients "
            "without one)"
        )
    if len(client_id) > limits.client_id_length_max:
        return (
            f"client.id is {len(client_id)} characters, over the limit of "
            f"{limits.client_id_length_max} (limits.client_id_length_max)"
        )
    return None


def quota_value_problem(key: str, value: float) -> str | None:
    """Why `value` cannot be the quota `key`, or None: Kafka's keys only, whole numbers > 0."""
    if key not in QUOTA_KEYS:
        return f"unknown quota key {key!r}: use {' or '.join(QUOTA_KEYS)}"
    if value != value or not 0 < value <= QUOTA_VALUE_MAX or value != int(value):
        return f"{key} must be a whole number of bytes per second > 0 (at most 2^53), not {value}"
    return None


def sorted_entities(quotas: ClientQuotas) -> list[EntityKey]:
    """The entities in canonical order: the default entity first, then client ids."""
    ids = sorted(key for key in quotas if key is not DEFAULT_ENTITY)
    return ([DEFAULT_ENTITY] if DEFAULT_ENTITY in quotas else []) + ids


def quota_for(quotas: ClientQuotas, client_id: str | None, key: str) -> float | None:
    """The quota `key` of the client with `client_id` (None: it sent none): its own entry's,
    else the default entity's, else None (unlimited)."""
    if client_id:
        own = quotas.get(client_id)
        if own is not None:
            value = own.get(key)
            if value is not None:
                return value
    default = quotas.get(DEFAULT_ENTITY)
    return None if default is None else default.get(key)


def replay_client_quota(
    quotas: MutableMapping[EntityKey, Mapping[str, float]], record: metadata_pb2.ClientQuotaRecord
) -> None:
    """Apply `record` to an image builder's quotas (metadata/replay.py); ValueError saying why
    the record is invalid (replay refuses its batch). An entity left without keys is dropped."""
    entity = entity_key(record.entity)
    values = dict(quotas.get(entity, {}))
    if record.HasField("value"):
        problem = quota_value_problem(record.key, record.value)
        if problem is not None:
            raise ValueError(problem)
        values[record.key] = record.value
    elif record.key not in QUOTA_KEYS:
        raise ValueError(f"unknown quota key {record.key!r}")
    else:
        values.pop(record.key, None)
    if values:
        quotas[entity] = values
    else:
        quotas.pop(entity, None)


def snapshot_records(quotas: ClientQuotas) -> list[metadata_pb2.MetadataRecord]:
    """The ClientQuotaRecords that rebuild `quotas`, in canonical order (metadata/snapshot.py)."""
    return [
        metadata_pb2.MetadataRecord(
            client_quota=metadata_pb2.ClientQuotaRecord(
                entity=entity_message(entity), key=key, value=value
            )
        )
        for entity in sorted_entities(quotas)
        for key, value in sorted(quotas[entity].items())
    ]

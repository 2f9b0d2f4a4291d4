"""Client quotas (KIP-13, KIP-55) in the metadata image: entities, keys, and which quota a client
gets.

Theory of operation. A quota applies to an *entity*: a user, a client.id, or a (user, client.id)
pair, each part a name or its type's default (Kafka's `--user-defaults`, `--client-defaults`).
A user is a principal's name without its `User:` type: what ssl.principal.mapping.rules makes of
a client certificate's subject, `ANONYMOUS` for a client without one. The image keeps quotas as
`MetadataImage.client_quotas`: QuotaEntity → {key: bytes per second}.

`quota_for` resolves a client's quota for one key as Kafka's default quota callback does: the
first of these entities that has a value for the key, most specific first,

    1. (user, client.id)     2. (user, default client)     3. (user)
    4. (default user, client.id)   5. (default user, default client)   6. (default user)
    7. (client.id)           8. (default client)

and says which clients share it (`Bucket`): the user's and/or the client.id's byte counts,
per the parts the entity names (a default part counts each user or client.id on its own, as
Kafka's metric tags do). So a user quota caps all of that user's clients together, and a
(default user) quota gives each user its own allowance. Clients that send no client.id match no
client.id entity; the default client covers them. Kafka's request_percentage and
controller_mutation_rate are not kept. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import NamedTuple

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


class _Default:
    """The default name of an entity part: one object, distinct from every name."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT"

    def __reduce__(self) -> str:
        return "DEFAULT"  # copies and pickles stay the one object


DEFAULT = _Default()

# An entity part: a name, DEFAULT, or None when the entity has no such part.
Part = str | _Default | None


class QuotaEntity(NamedTuple):
    """Whom a quota applies to: a user, a client.id, or both (see the module doc), each a name
    or QuotaEntity.DEFAULT: QuotaEntity(user="alice"), QuotaEntity(QuotaEntity.DEFAULT, "etl")."""

    user: Part = None
    client_id: Part = None

    DEFAULT = DEFAULT  # the default name of either part (not a field)


# The default client entity: every client.id without a value of its own.
DEFAULT_CLIENT = QuotaEntity(client_id=DEFAULT)

ClientQuotas = Mapping[QuotaEntity, Mapping[str, float]]


class Bucket(NamedTuple):
    """Whose bytes one quota counts together: a user's (None: not by user) and a client.id's
    (None: not by client.id; "" for clients that send none)."""

    user: str | None
    client_id: str | None


# The largest value a quota may take: what an int64 holds exactly as a double (Kafka's
# producer_byte_rate and consumer_byte_rate are LONG configs).
QUOTA_VALUE_MAX = float(2**53)


class InvalidEntityError(ValueError):
    """A ClientQuotaEntity that names no part, or a part's bad name."""


def entity_key(entity: metadata_pb2.ClientQuotaEntity) -> QuotaEntity:
    """The image's key of `entity`; InvalidEntityError with what to fix when it is not one."""
    client = _part(entity, "client_part", "client_id", "default_client", client_id_problem)
    user = _part(entity, "user_part", "user", "default_user", user_problem)
    if client is None and user is None:
        raise InvalidEntityError(
            "an entity names a user (user or default_user) and/or a client.id (client_id or "
            "default_client)"
        )
    return QuotaEntity(user, client)


def _part(entity, oneof: str, name_field: str, default_field: str, problem_of) -> Part:  # type: ignore[no-untyped-def]
    kind = entity.WhichOneof(oneof)
    if kind == default_field:
        if not getattr(entity, default_field):
            raise InvalidEntityError(f"{default_field} is true when set")
        return DEFAULT
    if kind == name_field:
        name = getattr(entity, name_field)
        problem = problem_of(name)
        if problem is not None:
            raise InvalidEntityError(problem)
        return name
    return None


def entity_message(key: QuotaEntity) -> metadata_pb2.ClientQuotaEntity:
    """The ClientQuotaEntity of an image key."""
    message = metadata_pb2.ClientQuotaEntity()
    if key.user is DEFAULT:
        message.default_user = True
    elif key.user is not None:
        message.user = key.user
    if key.client_id is DEFAULT:
        message.default_client = True
    elif key.client_id is not None:
        message.client_id = key.client_id
    return message


def entity_name(key: QuotaEntity) -> str:
    """How a person reads the entity (messages, the CLI), in the words of Kafka's tools."""
    parts = []
    if key.user is not None:
        parts.append("the default user" if key.user is DEFAULT else f"user {key.user!r}")
    if key.client_id is not None:
        client = key.client_id
        parts.append("the default client.id" if client is DEFAULT else f"client.id {client!r}")
    return ", ".join(parts)


def client_id_problem(client_id: str) -> str | None:
    """Why `client_id` cannot name a quota entity, or None."""
    if not client_id:
        return (
            "a client.id entity needs a non-empty id (the default client covers clients "
            "without one)"
        )
    if len(client_id) > limits.client_id_length_max:
        return (
            f"client.id is {len(client_id)} characters, over the limit of "
            f"{limits.client_id_length_max} (limits.client_id_length_max)"
        )
    return None


def user_problem(user: str) -> str | None:
    """Why `user` cannot name a quota entity, or None."""
    if not user:
        return "a user entity needs a non-empty name (default_user names every other user)"
    if user.startswith("User:"):
        return f"a user entity is the principal's name without its type: {user[5:]!r}, not {user!r}"
    if len(user) > limits.acl_principal_length_max:
        return (
            f"user is {len(user)} characters, over the limit of "
            f"{limits.acl_principal_length_max} (limits.acl_principal_length_max)"
        )
    return None


def quota_value_problem(key: str, value: float) -> str | None:
    """Why `value` cannot be the quota `key`, or None: Kafka's keys only, whole numbers > 0."""
    if key not in QUOTA_KEYS:
        return f"unknown quota key {key!r}: use {' or '.join(QUOTA_KEYS)}"
    if value != value or not 0 < value <= QUOTA_VALUE_MAX or value != int(value):
        return f"{key} must be a whole number of bytes per second > 0 (at most 2^53), not {value}"
    return None


def _part_order(part: Part) -> tuple[int, str]:
    if part is None:
        return (0, "")
    if part is DEFAULT:
        return (1, "")
    return (2, part)  # type: ignore[return-value]


def entity_order(key: QuotaEntity) -> tuple[tuple[int, str], tuple[int, str]]:
    """The canonical order: by user (none, then the default, then names), then by client.id."""
    return (_part_order(key.user), _part_order(key.client_id))


def sorted_entities(quotas: ClientQuotas) -> list[QuotaEntity]:
    """The entities in canonical order (entity_order)."""
    return sorted(quotas, key=entity_order)


def quota_for(
    quotas: ClientQuotas, user: str | None, client_id: str | None, key: str
) -> tuple[float, Bucket] | None:
    """The quota `key` of the client of `user` (None: unknown, only client.id entities apply)
    with `client_id` (None: it sent none), and whose bytes it counts together; None when no
    entity applies (unlimited). The order is the module doc's."""
    client_tag = client_id or ""
    candidates: list[tuple[QuotaEntity, Bucket]] = []
    if user is not None:
        for user_part in (user, DEFAULT):
            if client_id:
                candidates.append((QuotaEntity(user_part, client_id), Bucket(user, client_tag)))
            candidates.append((QuotaEntity(user_part, DEFAULT), Bucket(user, client_tag)))
            candidates.append((QuotaEntity(user_part, None), Bucket(user, None)))
    if client_id:
        candidates.append((QuotaEntity(None, client_id), Bucket(None, client_tag)))
    candidates.append((DEFAULT_CLIENT, Bucket(None, client_tag)))
    for entity, bucket in candidates:
        values = quotas.get(entity)
        if values is not None:
            value = values.get(key)
            if value is not None:
                return value, bucket
    return None


def replay_client_quota(
    quotas: MutableMapping[QuotaEntity, Mapping[str, float]],
    record: metadata_pb2.ClientQuotaRecord,
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


class ClientQuotaReplay:
    """The ClientQuotaRecord's part of replay.py's ImageBuilder (as acl_replay.AclReplay)."""

    client_quotas: MutableMapping[QuotaEntity, Mapping[str, float]]
    record_error: type[Exception]

    def _client_quota(self, record: metadata_pb2.ClientQuotaRecord, offset: int, _: bool) -> None:
        try:
            replay_client_quota(self.client_quotas, record)
        except ValueError as error:
            raise self.record_error(f"client quota record at {offset}: {error}") from error


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

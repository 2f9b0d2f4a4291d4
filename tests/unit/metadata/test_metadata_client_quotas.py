"""Goal: client quotas (KIP-13, KIP-55) live in the metadata image as the ClientQuotaRecords say,
every replica resolves a client's quota the same way (Kafka's eight entities, most specific
first, and which clients share it), and a snapshot carries them.

Method: replay hand-made batches with the real `replay`, check the image's `client_quotas`,
`quota_for` on it, the refusals of malformed records, and `to_snapshot`/`from_snapshot` round
trips (the random walk in test_metadata_snapshot_walk.py mixes quotas with every other kind).
"""

from __future__ import annotations

import pytest

from samsa.metadata.client_quotas import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    DEFAULT_CLIENT,
    PRODUCER_BYTE_RATE,
    Bucket,
    QuotaEntity,
    quota_for,
)
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import InvalidBatchError, replay
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

DEFAULT_CLIENT_MESSAGE = m.ClientQuotaEntity(default_client=True)


def quota(entity: m.ClientQuotaEntity, key: str, value: float | None) -> m.MetadataRecord:
    record = m.ClientQuotaRecord(entity=entity, key=key)
    if value is not None:
        record.value = value
    return m.MetadataRecord(client_quota=record)


def client(client_id: str) -> m.ClientQuotaEntity:
    return m.ClientQuotaEntity(client_id=client_id)


def user(name: str, client_id: str | None = None) -> m.ClientQuotaEntity:
    entity = m.ClientQuotaEntity(user=name)
    if client_id is not None:
        entity.client_id = client_id
    return entity


def applied(image: MetadataImage, *records: m.MetadataRecord) -> MetadataImage:
    return replay(image, make_batch(image, list(records), 1))


def test_records_set_and_remove_quotas_per_entity_and_key() -> None:
    image = applied(
        MetadataImage.empty(),
        quota(client("slow"), PRODUCER_BYTE_RATE, 262144),
        quota(client("slow"), CONSUMER_BYTE_RATE, 1024),
        quota(DEFAULT_CLIENT_MESSAGE, PRODUCER_BYTE_RATE, 1_000_000),
    )
    slow = QuotaEntity(client_id="slow")
    assert image.client_quotas == {
        slow: {PRODUCER_BYTE_RATE: 262144, CONSUMER_BYTE_RATE: 1024},
        DEFAULT_CLIENT: {PRODUCER_BYTE_RATE: 1_000_000},
    }
    image = applied(image, quota(client("slow"), CONSUMER_BYTE_RATE, None))
    assert image.client_quotas[slow] == {PRODUCER_BYTE_RATE: 262144}
    image = applied(image, quota(client("slow"), PRODUCER_BYTE_RATE, None))
    assert slow not in image.client_quotas, "an entity without keys is dropped"


def test_a_client_gets_its_own_quota_else_the_default_entitys_else_none() -> None:
    image = applied(
        MetadataImage.empty(),
        quota(client("slow"), PRODUCER_BYTE_RATE, 100),
        quota(DEFAULT_CLIENT_MESSAGE, PRODUCER_BYTE_RATE, 5000),
        quota(DEFAULT_CLIENT_MESSAGE, CONSUMER_BYTE_RATE, 7000),
    )
    quotas = image.client_quotas

    def value(client_id: str | None, key: str) -> float | None:
        found = quota_for(quotas, "alice", client_id, key)
        return None if found is None else found[0]

    assert value("slow", PRODUCER_BYTE_RATE) == 100
    assert value("slow", CONSUMER_BYTE_RATE) == 7000, "per key: the default's"
    assert value("other", PRODUCER_BYTE_RATE) == 5000
    assert value(None, PRODUCER_BYTE_RATE) == 5000, "no client.id: the default"
    assert value("", CONSUMER_BYTE_RATE) == 7000
    assert quota_for(quotas, "alice", "slow", PRODUCER_BYTE_RATE) == (100, Bucket(None, "slow"))
    assert quota_for(quotas, None, "x", PRODUCER_BYTE_RATE) == (5000, Bucket(None, "x"))
    assert quota_for(MetadataImage.empty().client_quotas, "a", "slow", PRODUCER_BYTE_RATE) is None


# Kafka's eight entities, most specific first, and the bucket each counts alice's client c1 in.
LEVELS = [
    (QuotaEntity("alice", "c1"), Bucket("alice", "c1")),
    (QuotaEntity("alice", DEFAULT), Bucket("alice", "c1")),
    (QuotaEntity("alice", None), Bucket("alice", None)),
    (QuotaEntity(DEFAULT, "c1"), Bucket("alice", "c1")),
    (QuotaEntity(DEFAULT, DEFAULT), Bucket("alice", "c1")),
    (QuotaEntity(DEFAULT, None), Bucket("alice", None)),
    (QuotaEntity(None, "c1"), Bucket(None, "c1")),
    (QuotaEntity(None, DEFAULT), Bucket(None, "c1")),
]
# Entities that never apply to alice's client c1: another user's, another client.id's.
STRANGERS = [QuotaEntity("bob", None), QuotaEntity("alice", "c2"), QuotaEntity(None, "c2")]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_entity_with_a_value_wins_and_names_its_bucket(level: int) -> None:
    quotas = {
        entity: {PRODUCER_BYTE_RATE: float(1000 + rank)}
        for rank, (entity, _) in enumerate(LEVELS)
        if rank >= level
    }
    quotas.update({entity: {PRODUCER_BYTE_RATE: 1.0} for entity in STRANGERS})
    # A more specific entity with only the other key set does not hide this one.
    for entity, _ in LEVELS[:level]:
        quotas[entity] = {CONSUMER_BYTE_RATE: 7.0}
    assert quota_for(quotas, "alice", "c1", PRODUCER_BYTE_RATE) == (1000 + level, LEVELS[level][1])


def test_clients_without_a_client_id_match_defaults_and_users_only() -> None:
    quotas = {
        QuotaEntity("alice", "c1"): {PRODUCER_BYTE_RATE: 1.0},
        QuotaEntity(DEFAULT, DEFAULT): {PRODUCER_BYTE_RATE: 2.0},
    }
    assert quota_for(quotas, "alice", None, PRODUCER_BYTE_RATE) == (2.0, Bucket("alice", ""))
    assert quota_for(quotas, None, None, PRODUCER_BYTE_RATE) is None, "no user: clients only"


def test_user_entities_replay_and_round_trip_a_snapshot() -> None:
    image = applied(
        MetadataImage.empty(),
        quota(user("CN=bob,O=samsa"), PRODUCER_BYTE_RATE, 5),
        quota(user("alice", "c1"), CONSUMER_BYTE_RATE, 4),
        quota(m.ClientQuotaEntity(default_user=True, default_client=True), PRODUCER_BYTE_RATE, 3),
        quota(m.ClientQuotaEntity(default_user=True), PRODUCER_BYTE_RATE, 2),
        quota(client("c1"), PRODUCER_BYTE_RATE, 1),
    )
    assert set(image.client_quotas) == {
        QuotaEntity("CN=bob,O=samsa", None),
        QuotaEntity("alice", "c1"),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(None, "c1"),
    }
    snapshot = to_snapshot(image)
    entities = [r.client_quota.entity for r in snapshot.records if r.HasField("client_quota")]
    assert entities == [
        client("c1"),
        m.ClientQuotaEntity(default_user=True),
        m.ClientQuotaEntity(default_user=True, default_client=True),
        user("CN=bob,O=samsa"),
        user("alice", "c1"),
    ]
    assert from_snapshot(snapshot) == image


@pytest.mark.parametrize(
    "record",
    [
        quota(m.ClientQuotaEntity(), PRODUCER_BYTE_RATE, 1),  # no entity
        quota(client(""), PRODUCER_BYTE_RATE, 1),  # an empty client.id
        quota(client("x" * 256), PRODUCER_BYTE_RATE, 1),  # over limits.client_id_length_max
        quota(client("a"), "request_percentage", 1),  # not a key Samsa keeps
        quota(client("a"), "request_percentage", None),
        quota(client("a"), PRODUCER_BYTE_RATE, 0),
        quota(client("a"), PRODUCER_BYTE_RATE, -5),
        quota(client("a"), PRODUCER_BYTE_RATE, 1.5),
        quota(client("a"), PRODUCER_BYTE_RATE, float("nan")),
        quota(client("a"), PRODUCER_BYTE_RATE, float("inf")),
        quota(user(""), PRODUCER_BYTE_RATE, 1),  # an empty user
        quota(user("User:alice"), PRODUCER_BYTE_RATE, 1),  # a principal, not its name
        quota(user("x" * 513), PRODUCER_BYTE_RATE, 1),  # over limits.acl_principal_length_max
        quota(m.ClientQuotaEntity(default_user=False), PRODUCER_BYTE_RATE, 1),
    ],
)
def test_replay_refuses_a_malformed_quota_record(record: m.MetadataRecord) -> None:
    with pytest.raises(InvalidBatchError):
        applied(MetadataImage.empty(), record)


def test_a_snapshot_carries_the_quotas_in_canonical_order() -> None:
    image = applied(
        MetadataImage.empty(),
        quota(client("zed"), CONSUMER_BYTE_RATE, 3),
        quota(client("abe"), PRODUCER_BYTE_RATE, 2),
        quota(DEFAULT_CLIENT_MESSAGE, PRODUCER_BYTE_RATE, 1),
    )
    snapshot = to_snapshot(image)
    entities = [r.client_quota.entity for r in snapshot.records if r.HasField("client_quota")]
    assert entities == [DEFAULT_CLIENT_MESSAGE, client("abe"), client("zed")]
    assert from_snapshot(snapshot) == image

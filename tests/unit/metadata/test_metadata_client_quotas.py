"""Goal: client quotas (KIP-13) live in the metadata image as the ClientQuotaRecords say, every
replica resolves a client's quota the same way (its own entry, else the default entity's, else
none), and a snapshot carries them.

Method: replay hand-made batches with the real `replay`, check the image's `client_quotas`,
`quota_for` on it, the refusals of malformed records, and `to_snapshot`/`from_snapshot` round
trips (the random walk in test_metadata_snapshot_walk.py mixes quotas with every other kind).
"""

from __future__ import annotations

import pytest

from samsa.metadata.client_quotas import (
    CONSUMER_BYTE_RATE,
    DEFAULT_ENTITY,
    PRODUCER_BYTE_RATE,
    quota_for,
)
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import InvalidBatchError, replay
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

DEFAULT = m.ClientQuotaEntity(default_client=True)


def quota(entity: m.ClientQuotaEntity, key: str, value: float | None) -> m.MetadataRecord:
    record = m.ClientQuotaRecord(entity=entity, key=key)
    if value is not None:
        record.value = value
    return m.MetadataRecord(client_quota=record)


def client(client_id: str) -> m.ClientQuotaEntity:
    return m.ClientQuotaEntity(client_id=client_id)


def applied(image: MetadataImage, *records: m.MetadataRecord) -> MetadataImage:
    return replay(image, make_batch(image, list(records), 1))


def test_records_set_and_remove_quotas_per_entity_and_key() -> None:
    image = applied(
        MetadataImage.empty(),
        quota(client("slow"), PRODUCER_BYTE_RATE, 262144),
        quota(client("slow"), CONSUMER_BYTE_RATE, 1024),
        quota(DEFAULT, PRODUCER_BYTE_RATE, 1_000_000),
    )
    assert image.client_quotas == {
        "slow": {PRODUCER_BYTE_RATE: 262144, CONSUMER_BYTE_RATE: 1024},
        DEFAULT_ENTITY: {PRODUCER_BYTE_RATE: 1_000_000},
    }
    image = applied(image, quota(client("slow"), CONSUMER_BYTE_RATE, None))
    assert image.client_quotas["slow"] == {PRODUCER_BYTE_RATE: 262144}
    image = applied(image, quota(client("slow"), PRODUCER_BYTE_RATE, None))
    assert "slow" not in image.client_quotas, "an entity without keys is dropped"


def test_a_client_gets_its_own_quota_else_the_default_entitys_else_none() -> None:
    image = applied(
        MetadataImage.empty(),
        quota(client("slow"), PRODUCER_BYTE_RATE, 100),
        quota(DEFAULT, PRODUCER_BYTE_RATE, 5000),
        quota(DEFAULT, CONSUMER_BYTE_RATE, 7000),
    )
    quotas = image.client_quotas
    assert quota_for(quotas, "slow", PRODUCER_BYTE_RATE) == 100
    assert quota_for(quotas, "slow", CONSUMER_BYTE_RATE) == 7000, "per key: the default's"
    assert quota_for(quotas, "other", PRODUCER_BYTE_RATE) == 5000
    assert quota_for(quotas, None, PRODUCER_BYTE_RATE) == 5000, "no client.id: the default"
    assert quota_for(quotas, "", CONSUMER_BYTE_RATE) == 7000
    assert quota_for(MetadataImage.empty().client_quotas, "slow", PRODUCER_BYTE_RATE) is None


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
        quota(DEFAULT, PRODUCER_BYTE_RATE, 1),
    )
    snapshot = to_snapshot(image)
    entities = [r.client_quota.entity for r in snapshot.records if r.HasField("client_quota")]
    assert entities == [DEFAULT, client("abe"), client("zed")]
    assert from_snapshot(snapshot) == image

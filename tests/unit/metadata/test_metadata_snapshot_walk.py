"""Goal: a replica that loaded a snapshot is the same replica as one that replayed the log, for
every kind of record: the image rebuilt from `to_snapshot` equals the replayed one, its snapshot
is byte for byte the same, and the next batch (valid or refused) does the same to both. Brokers,
followers and restarted controllers load snapshots; any difference would be a silent divergence
that only the running hash notices later.

Method: a seeded random walk of 250 batches per seed over all sixteen record kinds (brokers
registering, restarting, fenced (in controlled shutdown or not), unfenced, unregistered; topics
created, grown, changed (eligible leader replicas too), deleted and re-created under the same
name; topic and broker configs
set, emptied and removed; producer id blocks; coordinators registering and fenced; assignments
of both coordinator topics; client quotas set and removed; ACL bindings added and removed), some
deliberately stale or invalid, each batch replayed with the real `replay`. After every applied
batch the image goes through a snapshot and the next batch is replayed on both. A failure names
its seed and step.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from metadata_helpers import change, config, fence, partition, register, remove, topic, unfence

from samsa.common import scram
from samsa.metadata import scram_credentials
from samsa.metadata.acl_replay import add_record, binding_fields, remove_record
from samsa.metadata.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from samsa.metadata.coordinators import COORDINATOR_TOPICS
from samsa.metadata.image import BROKER_RESOURCE, NO_LEADER, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import InvalidBatchError, replay
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

STEPS = 250
TOPIC_NAMES = ("a", "b", *COORDINATOR_TOPICS)


def _broker_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    brokers = sorted(image.brokers.values(), key=lambda broker: broker.broker_id)
    if not brokers or rng.random() < 0.3:
        return register(
            rng.randrange(5), rack=rng.choice(["", "a", "b"]), incarnation=str(rng.random())
        )
    broker = rng.choice(brokers)
    epoch = broker.broker_epoch if rng.random() < 0.85 else broker.broker_epoch - 1  # stale
    kind = rng.randrange(3)
    if kind == 0:
        return unfence(broker.broker_id, epoch)
    if kind == 1:
        return fence(broker.broker_id, epoch, shutdown=rng.random() < 0.3)
    record = m.UnregisterBrokerRecord(broker_id=broker.broker_id, broker_epoch=epoch)
    return m.MetadataRecord(unregister_broker=record)


def _topic_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    topics = [image.topics[name] for name in sorted(image.topics)]
    if not topics or rng.random() < 0.25:
        return topic(rng.choice(TOPIC_NAMES), rng.randbytes(16))
    chosen = rng.choice(topics)
    kind = rng.randrange(6)
    if kind == 0:
        return remove(chosen.topic_id)
    if kind in (1, 2) or not chosen.partitions:
        replicas = rng.sample(range(5), rng.randint(1, 3))
        return partition(chosen.topic_id, len(chosen.partitions), replicas)
    state = chosen.partitions[rng.choice(sorted(chosen.partitions))]
    fields: dict[str, object] = {}
    if rng.random() < 0.5:
        fields["leader"] = rng.choice([*state.replicas, NO_LEADER, 9])  # 9: not a replica
    if rng.random() < 0.5:
        fields["isr"] = rng.sample(state.replicas, rng.randint(0, len(state.replicas)))
    if rng.random() < 0.3:  # eligible leader replicas: refused when they overlap the ISR
        outside = [r for r in state.replicas if r not in fields.get("isr", state.isr)]  # type: ignore[operator]
        fields["elr"] = rng.sample(outside, rng.randint(0, len(outside)))
        if rng.random() < 0.1:
            fields["elr"] = [*fields["elr"], state.replicas[0]]  # maybe in the ISR: refused
    if not fields:
        fields["replicas"] = [*state.replicas, 7]
    return change(chosen.topic_id, state.partition, **fields)


def _config_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    value = rng.choice([None, "", "1", "2"])
    if image.topics and rng.random() < 0.7:
        name = rng.choice(sorted(image.topics))
        return config(TOPIC_RESOURCE, name, rng.choice(["x", "y"]), value)
    return config(BROKER_RESOURCE, rng.choice(["", "1"]), rng.choice(["x", "y"]), value)


def _producer_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    if rng.random() < 0.5:
        step = rng.randint(0, 1000)  # 0: does not move forward, refused
        record = m.ProducerIdsRecord(
            broker_id=1, broker_epoch=0, next_producer_id=image.next_producer_id + step
        )
        return m.MetadataRecord(producer_ids=record)
    name = rng.choice(COORDINATOR_TOPICS)
    partitions = sorted(image.topics[name].partitions) if name in image.topics else []
    number = rng.choice(partitions or [0])  # no such partition: refused
    previous = image.coordinator_assignments.get((name, number))
    live = [c for _, c in sorted(image.coordinators.items()) if not c.fenced]
    owner = rng.choice(live) if live and rng.random() < 0.8 else None
    record = m.CoordinatorAssignmentRecord(
        topic=name,
        partition=number,
        coordinator_id=-1 if owner is None else owner.coordinator_id,
        coordinator_epoch=-1 if owner is None else owner.coordinator_epoch,
        assignment_epoch=0 if previous is None else previous.assignment_epoch + 1,
        producer_id=(
            image.next_producer_id + rng.randint(-1, 2)
            if previous is None
            else previous.producer_id
        ),
    )
    return m.MetadataRecord(coordinator_assignment=record)


def _coordinator_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    coordinators = [c for _, c in sorted(image.coordinators.items())]
    if not coordinators or rng.random() < 0.5:
        record = m.RegisterCoordinatorRecord(
            coordinator_id=rng.randrange(3), incarnation_id=str(rng.random()), endpoint="h:1"
        )
        return m.MetadataRecord(register_coordinator=record)
    chosen = rng.choice(coordinators)
    fenced = m.FenceCoordinatorRecord(
        coordinator_id=chosen.coordinator_id, coordinator_epoch=chosen.coordinator_epoch
    )
    return m.MetadataRecord(fence_coordinator=fenced)


def _quota_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    entity = rng.choice([m.ClientQuotaEntity(default_client=True), m.ClientQuotaEntity()])
    if rng.random() < 0.8:
        entity = m.ClientQuotaEntity(client_id=rng.choice(["a", "b"]))  # else maybe none: refused
    record = m.ClientQuotaRecord(entity=entity, key=rng.choice(["producer_byte_rate", "x"]))
    if rng.random() < 0.7:
        record.value = rng.choice([1024.0, 2048.0, 0.5])  # 0.5: not a whole number, refused
    return m.MetadataRecord(client_quota=record)


def _acl_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    binding = AclBinding(
        rng.choice([ResourceType.TOPIC, ResourceType.GROUP]),
        rng.choice(["a", "b", "*"]),
        rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
        rng.choice(["User:x", "User:*"]),
        "*",
        rng.choice([Operation.READ, Operation.DESCRIBE]),
        rng.choice([Permission.ALLOW, Permission.DENY]),
    )
    if rng.random() < 0.1:  # not a binding (PREFIXED *, or no operation): refused
        fields = binding_fields(binding) | rng.choice([{"operation": 0}, {"pattern_type": 1}])
        return m.MetadataRecord(access_control_entry=m.AccessControlEntryRecord(**fields))
    if binding.problem() is not None:
        binding = replace(binding, resource_name="a")  # a PREFIXED * is no pattern
    return remove_record(binding) if rng.random() < 0.4 else add_record(binding)


def _scram_record(rng: random.Random, image: MetadataImage) -> m.MetadataRecord:
    mechanism = rng.choice([scram.SCRAM_SHA_256, scram.SCRAM_SHA_512])
    name = rng.choice(["alice", "bob"])
    if rng.random() < 0.3:
        return scram_credentials.removal_record(name, mechanism)
    salt = rng.choice([b"salt", b""])  # an empty salt: refused
    credential = scram.credential_from_salted_password(mechanism, salt, b"p" * 64, 4096)
    return scram_credentials.credential_record(name, credential)


MAKERS = (_broker_record, _topic_record, _topic_record, _config_record, _producer_record)
MAKERS += (_producer_record, _coordinator_record, _quota_record, _acl_record, _scram_record)


def _batch(rng: random.Random, image: MetadataImage) -> m.MetadataRecordBatch:
    records = [rng.choice(MAKERS)(rng, image) for _ in range(rng.randint(1, 3))]
    return make_batch(image, records, rng.randrange(1 << 40))


def _replayed(image: MetadataImage, batch: m.MetadataRecordBatch) -> MetadataImage | str:
    try:
        return replay(image, batch)
    except InvalidBatchError as error:
        return f"refused: {error}"


@pytest.mark.parametrize("seed", range(12))
def test_an_image_loaded_from_its_snapshot_replays_like_the_original(seed: int) -> None:
    rng = random.Random(seed)
    image = MetadataImage.empty()
    applied = 0
    for step in range(STEPS):
        after = _replayed(image, _batch(rng, image))
        if isinstance(after, str):
            continue
        image, applied = after, applied + 1
        snapshot = to_snapshot(image)
        restored = from_snapshot(snapshot)
        where = f"seed {seed} step {step}"
        assert restored == image, where
        assert to_snapshot(restored).SerializeToString(deterministic=True) == (
            snapshot.SerializeToString(deterministic=True)
        ), where
        following = _batch(rng, image)
        assert _replayed(restored, following) == _replayed(image, following), where
    assert applied > STEPS // 2, f"seed {seed}: only {applied} batches applied"

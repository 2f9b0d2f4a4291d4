"""Goal: a broker ends with the same partitions whatever pieces the metadata log reaches it in.
A broker that follows batch by batch, one that gets several batches in one FetchMetadata answer,
and one that loads a snapshot (it started, fell behind, or diverged) must host the same
partitions with the same leader, leader epoch, topic id and configs as the image says, at every
prefix of the log (KRaft's property: replaying the log equals applying its deltas one by one).

Method: seeded random logs (metadata_batches.py: topics created, grown, deleted and re-created,
leaders, ISRs, replicas and configs changed, brokers fenced). Images come from the real follower
path, `apply_fetch` and the chunked snapshot transfer, fed the log cut into random answers,
some of them snapshots (served and assembled in chunks of 64 bytes); each image
must equal the one replayed batch by batch. A model of one broker's partitions applies the
actions `partition_changes` gives between the images it saw; after each step it must equal what
the image says, and so must the model of a broker that jumped there from any earlier image
through a snapshot. A failure names its seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from metadata_batches import BROKERS, random_batch, start_image

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.metadata.snapshot_transfer import ServedSnapshot, SnapshotAssembler
from samsa.services.broker.metadata.metadata_diff import (
    BecomeFollower,
    BecomeLeader,
    PartitionAction,
    StopReplica,
    partition_changes,
    topic_configs,
)
from samsa.services.runtime.metadata_log import apply_fetch
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

SEEDS = 120
BATCHES = 12

# (topic, partition) -> (topic id, leader, leader epoch, configs)
Hosted = dict[tuple[str, int], tuple[bytes, int, int, Mapping[str, str]]]


def carry_out(hosted: Hosted, actions: list[PartitionAction], broker_id: int) -> Hosted:
    """What a broker hosts after the actions, as the partition host would carry them out."""
    hosted = dict(hosted)
    for action in actions:
        key = (action.topic, action.partition)
        if isinstance(action, StopReplica):
            assert key in hosted, f"stops {key}, which it does not host"
            del hosted[key]
        elif isinstance(action, BecomeLeader):
            hosted[key] = (action.topic_id, broker_id, action.leader_epoch, dict(action.configs))
        elif isinstance(action, BecomeFollower):
            epoch = action.leader_epoch
            hosted[key] = (action.topic_id, action.leader_id, epoch, dict(action.configs))
        else:
            assert key in hosted, f"updates the configs of {key}, which it does not host"
            topic_id, leader, epoch, _ = hosted[key]
            hosted[key] = (topic_id, leader, epoch, dict(action.configs))
    return hosted


def said_by(image: MetadataImage, broker_id: int) -> Hosted:
    return {
        (topic.name, state.partition): (
            topic.topic_id,
            state.leader,
            state.leader_epoch,
            dict(topic_configs(image, topic.name)),
        )
        for topic in image.topics.values()
        for state in topic.partitions.values()
        if broker_id in state.replicas
    }


def random_log(rng: random.Random) -> tuple[MetadataImage, list[m.MetadataRecordBatch]]:
    start = image = start_image()
    log = []
    for _ in range(BATCHES):
        records = random_batch(rng, image)
        if records:
            log.append(make_batch(image, records, 0))
            image = replay(image, log[-1])
    return start, log


def transferred(image: MetadataImage) -> MetadataImage:
    """`image` sent as a controller sends a snapshot and loaded as a follower loads it."""
    served = ServedSnapshot(to_snapshot(image))
    assembler = SnapshotAssembler(served.snapshot_id)
    while not assembler.done:
        assembler.accept(served.chunk(assembler.position, 64))
    return assembler.image()


def followed_images(
    rng: random.Random, start: MetadataImage, log: list[m.MetadataRecordBatch]
) -> list[MetadataImage]:
    """The images a follower holds, fed `log` in random answers of apply_fetch: one to three
    batches, or a snapshot of the image after them."""
    replayed = [start]
    for batch in log:
        replayed.append(replay(replayed[-1], batch))
    images, position = [start], 0
    while position < len(log):
        reached = min(len(log), position + rng.randint(1, 3))
        if rng.random() < 0.3:
            image = transferred(replayed[reached])
        else:
            answer = c.FetchMetadataResponse()
            answer.batches.extend(log[position:reached])
            image = apply_fetch(images[-1], answer)
        assert image == replayed[reached], "a follower's image differs from the replayed one"
        images.append(image)
        position = reached
    return images


def test_a_broker_hosts_what_the_image_says_whatever_pieces_the_log_came_in() -> None:
    compared = 0
    for seed in range(SEEDS):
        rng = random.Random(seed)
        start, log = random_log(rng)
        images = followed_images(rng, start, log)
        for broker_id in BROKERS:
            hosted = carry_out(
                {}, partition_changes(MetadataImage.empty(), images[0], broker_id), broker_id
            )
            for step in range(1, len(images)):
                actions = partition_changes(images[step - 1], images[step], broker_id)
                hosted = carry_out(hosted, actions, broker_id)
                assert hosted == said_by(images[step], broker_id), f"seed {seed} step {step}"
                compared += bool(hosted)
                loaded = from_snapshot(to_snapshot(images[step]))  # shares nothing
                for earlier in range(step):  # a broker that jumped here by a snapshot
                    before = said_by(images[earlier], broker_id)
                    jump = partition_changes(images[earlier], loaded, broker_id)
                    assert carry_out(before, jump, broker_id) == hosted, (
                        f"seed {seed}: a jump from {earlier} to {step} hosts otherwise"
                    )
    assert compared > 500, "the random logs must give brokers partitions to compare"

"""Goal: whatever order coordinators register, restart, time out and shut down in, the ownership
of both coordinator topics (__consumer_offsets, __transaction_state) stays safe and balanced:
every partition belongs to a live coordinator whenever one is live, counts differ by at most one
within each topic, assignment epochs never go back (and move on every change of owner), each
partition keeps the producer id of its first assignment, no two partitions (of either topic)
share one, and none lies in a block a broker was given (all below next_producer_id).

Method: a seeded random walk of 200 steps per seed over the pure decisions, each committed with
the real replay: register (a new id or a restart of a known one), expire a session, controlled
shutdown, a stale heartbeat, a broker taking a producer-id block. After each step the image must
already satisfy the invariants (registration and fencing plan in the same batch); then the main
loop's round (plan_coordinator_topics, plan_coordinator_assignments) runs and the invariants are
checked again, plus a history check across all steps. A failure names its seed and step.
"""

from __future__ import annotations

import random

import pytest
from coordinator_helpers import (
    DEFAULTS,
    check_invariants,
    commit,
    create_coordinator_topics,
    heartbeat,
    plan,
    register,
    with_brokers,
)

from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c

STEPS = 200
COORDINATOR_IDS = range(6)


def _step(image: MetadataImage, rng: random.Random, serial: int) -> tuple[MetadataImage, str]:
    live = [coordinator.coordinator_id for coordinator in image.live_coordinators()]
    kind = rng.choice(["register", "register", "expire", "shutdown", "stale", "block"])
    if kind == "register":
        coordinator_id = rng.choice(COORDINATOR_IDS)
        image, response = register(image, coordinator_id, f"incarnation-{serial}")
        assert response.status.error_code == 0
        return image, f"register {coordinator_id}"
    if kind == "expire" and live:
        victim = rng.choice(live)
        return commit(image, cp.fence_coordinators(image, [victim])), f"expire {victim}"
    if kind == "shutdown" and live:
        victim = rng.choice(live)
        image, response = heartbeat(image, victim, want_shutdown=True)
        assert response.should_shut_down
        return image, f"shutdown {victim}"
    if kind == "stale" and image.coordinators:
        coordinator_id = rng.choice(sorted(image.coordinators))
        stale_epoch = image.coordinators[coordinator_id].coordinator_epoch - 1
        after, response = heartbeat(image, coordinator_id, epoch=stale_epoch)
        assert after is image and response.status.error_code != 0
        return image, f"stale heartbeat {coordinator_id}"
    request = c.AllocateProducerIdsRequest(broker_id=1, broker_epoch=0)
    return commit(image, cp.allocate_producer_ids(image, request, block_size=7)), "block"


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_walk_keeps_ownership_safe_and_balanced(seed: int) -> None:
    rng = random.Random(seed)
    image = with_brokers(2)
    first_producer_ids: dict[tuple[str, int], int] = {}
    blocks: list[range] = []
    for serial in range(STEPS):
        before = image
        image, what = _step(image, rng, serial)
        where = f"seed {seed}, step {serial} ({what})"
        if what == "block":
            blocks.append(range(before.next_producer_id, image.next_producer_id))
        try:
            check_invariants(before, image)
            planned, _ = create_coordinator_topics(image, DEFAULTS)
            planned = plan(planned)
            check_invariants(image, planned)
            if planned.topics.keys() == image.topics.keys():
                assert planned is image, "the step left planning work for the main loop"
        except AssertionError as error:
            raise AssertionError(f"{where}: {error}") from error
        image = planned
        for key, assignment in image.coordinator_assignments.items():
            first = first_producer_ids.setdefault(key, assignment.producer_id)
            assert assignment.producer_id == first, f"{where}: producer id of {key} changed"
            assert not any(assignment.producer_id in block for block in blocks), where
    assert len(first_producer_ids) == (
        DEFAULTS.offsets_topic_num_partitions + DEFAULTS.transaction_state_log_num_partitions
    )

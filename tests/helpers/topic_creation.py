"""CreateTopics decided by the pure control plane the same way on every run, for tests that
build cluster images with topics. Shared by the tests through pytest's `pythonpath`
(pyproject.toml)."""

from __future__ import annotations

import random

from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane as cp
from samsa.v1 import controller_pb2 as c


def create_topics_decided(
    image: MetadataImage,
    request: c.CreateTopicsRequest,
    defaults: cp.ClusterDefaults,
    *,
    first_id: int = 1,
    seed: int = 7,
) -> cp.ControlResult:
    """The control plane's decision on `request`: replicas placed by a Random seeded with `seed`,
    topic ids counting up from `first_id` (16 bytes, big-endian)."""
    ids = iter(range(first_id, first_id + 1000))
    return cp.create_topics(
        image,
        request,
        rng=random.Random(seed),
        defaults=defaults,
        new_topic_id=lambda: next(ids).to_bytes(16, "big"),
    )

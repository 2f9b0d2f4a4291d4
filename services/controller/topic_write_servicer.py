"""The controller's topic writes (CreateTopics, DeleteTopics, CreatePartitions), as a mixin of
ControllerServicer (servicer.py), whose helpers they use: the count check, then `_write` (the
driver: NOT_CONTROLLER on a controller that is not active) of the pure decision (control_plane).
A topic the caller may not create, delete or alter is answered TOPIC_AUTHORIZATION_FAILED and the
others are applied, as Kafka does (topic_admin_access.py)."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.services.controller import control_plane
from samsa.services.runtime.topic_admin_access import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    per_topic,
)
from samsa.v1 import controller_pb2


class TopicWriteRpcs:
    """CreateTopics, DeleteTopics and CreatePartitions for ControllerServicer."""

    _write: Any
    _check_count: Any
    rng: Any
    defaults: Any

    async def CreateTopics(self, request, context):  # type: ignore[no-untyped-def]
        await self._check_count(context, "topics", len(request.topics))

        def create(allowed: controller_pb2.CreateTopicsRequest) -> Any:
            return self._write(
                controller_pb2.CreateTopicsResponse,
                lambda image: control_plane.create_topics(
                    image,
                    allowed,
                    rng=self.rng,
                    defaults=self.defaults,
                    new_topic_id=lambda: uuid.uuid4().bytes,
                ),
            )

        return await per_topic(CREATE_TOPICS, request, create)

    async def DeleteTopics(self, request, context):  # type: ignore[no-untyped-def]
        await self._check_count(context, "topics", len(request.names))
        return await per_topic(
            DELETE_TOPICS,
            request,
            lambda allowed: self._write(
                controller_pb2.DeleteTopicsResponse,
                lambda image: control_plane.delete_topics(image, allowed),
            ),
        )

    async def CreatePartitions(self, request, context):  # type: ignore[no-untyped-def]
        await self._check_count(context, "topics", len(request.topics))
        return await per_topic(
            CREATE_PARTITIONS,
            request,
            lambda allowed: self._write(
                controller_pb2.CreatePartitionsResponse,
                lambda image: control_plane.create_partitions(image, allowed, rng=self.rng),
            ),
        )

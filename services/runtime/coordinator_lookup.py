"""CoordinatorLookupService.FindCoordinator, served by every Samsa service from its own image.

- `CoordinatorLookupServicer` answers FindCoordinator from the image of the process that serves
  it: a controller's committed image, a broker's or a coordinator's replayed one (any of them
  answers, active or not, as for metadata reads; the answer carries the image's
  `metadata_offset`, so a client can tell a stale one). Each key (a group id, or a transactional
  id) is answered by the pure `samsa.metadata.coordinators.find_coordinator`. A request with an
  unknown key type is refused whole (INVALID_ARGUMENT), one with more keys than
  `limits.admin_request_items_max` too (RESOURCE_EXHAUSTED).
- `offsets_topic_replication_factor` and `transaction_state_log_replication_factor` are known to
  the controller only (offsets.topic.replication.factor, transaction.state.log.replication.
  factor); brokers and coordinators pass None, and their message for a missing
  `__consumer_offsets` or `__transaction_state` is a little less precise.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from samsa.common import limits
from samsa.common.request_counts import too_many
from samsa.metadata.coordinators import GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, find_coordinator
from samsa.metadata.image import MetadataImage
from samsa.v1 import coordinator_pb2, coordinator_pb2_grpc

LOOKUP_SERVICE_NAME = coordinator_pb2.DESCRIPTOR.services_by_name[
    "CoordinatorLookupService"
].full_name


class CoordinatorLookupServicer(coordinator_pb2_grpc.CoordinatorLookupServiceServicer):
    """Answers FindCoordinator from one process's current metadata image."""

    def __init__(
        self,
        *,
        image: Callable[[], MetadataImage],
        offsets_topic_replication_factor: int | None,
        # Defaults to None (unknown) so that callers written before transactions keep working.
        transaction_state_log_replication_factor: int | None = None,
    ) -> None:
        self.image = image
        self.offsets_topic_replication_factor = offsets_topic_replication_factor
        self.transaction_state_log_replication_factor = transaction_state_log_replication_factor

    async def FindCoordinator(self, request, context):
        if request.key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"key_type {request.key_type} is not supported; send "
                "COORDINATOR_KEY_TYPE_GROUP with group ids as keys, or "
                "COORDINATOR_KEY_TYPE_TRANSACTION with transactional ids",
            )
        message = too_many(
            len(request.keys), "keys", limits.admin_request_items_max, " per FindCoordinator"
        )
        if message is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        image = self.image()  # one image for every key: one consistent answer
        response = coordinator_pb2.FindCoordinatorResponse()
        for key in request.keys:
            found = find_coordinator(
                image,
                request.key_type,
                key,
                offsets_topic_replication_factor=self.offsets_topic_replication_factor,
                transaction_state_log_replication_factor=(
                    self.transaction_state_log_replication_factor
                ),
            )
            response.coordinators.add(
                key=found.key,
                error_code=found.error_code,  # type: ignore[arg-type]
                error_message=found.error_message,
                coordinator_id=found.coordinator_id,
                endpoint=found.endpoint,
                partition=found.partition,
                metadata_offset=found.metadata_offset,
            )
        return response

"""The controller's gRPC adapters for coordinators: FindCoordinator, and coordinators' proofs.

- `CoordinatorLookupServicer` serves CoordinatorLookupService.FindCoordinator from this
  controller's own image (any controller answers, active or not, as for metadata reads): each key
  is answered by the pure `samsa.metadata.coordinators.find_coordinator`. A request with an
  unknown key type is refused whole (INVALID_ARGUMENT), one with more keys than
  `limits.admin_request_items_max` too (RESOURCE_EXHAUSTED).
- `require_coordinator` is the first line of the ControllerService methods a coordinator calls
  (RegisterCoordinator, CoordinatorHeartbeat): the call must carry the cluster's membership proof
  signed as the coordinator id it claims, exactly as brokers sign theirs.
"""

from __future__ import annotations

import time

import grpc

from samsa.common import limits
from samsa.metadata.coordinators import GROUP_KEY_TYPE
from samsa.services.controller import control_plane
from samsa.services.controller.driver import ControllerDriver
from samsa.services.runtime import member_auth, membership
from samsa.v1 import coordinator_pb2, coordinator_pb2_grpc

LOOKUP_SERVICE_NAME = coordinator_pb2.DESCRIPTOR.services_by_name[
    "CoordinatorLookupService"
].full_name


def _now_ms() -> int:
    return int(time.time() * 1000)


async def require_coordinator(
    context: grpc.aio.ServicerContext,
    key: bytes,
    method_path: str,
    coordinator_id: int,
    method: str,
) -> None:
    """Abort PERMISSION_DENIED unless the call to `method_path` proves it comes from coordinator
    `coordinator_id`, with a message saying what to fix."""
    error = membership.verify(
        key, member_auth.proof_in(context), method_path, coordinator_id, _now_ms()
    )
    if error is None:
        return
    what = f"{method} as coordinator_id={coordinator_id}"
    if error.missing:
        message = (
            f"{what} must carry the cluster's membership proof ({membership.METADATA_KEY} "
            "metadata); coordinators get it from --secret-file"
        )
    else:
        message = f"{what}: the cluster's membership proof is refused: {error}"
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, message)


class CoordinatorLookupServicer(coordinator_pb2_grpc.CoordinatorLookupServiceServicer):
    """Answers FindCoordinator from one controller's committed image."""

    def __init__(
        self, *, driver: ControllerDriver, defaults: control_plane.ClusterDefaults
    ) -> None:
        self.driver = driver
        self.defaults = defaults

    async def FindCoordinator(self, request, context):
        if request.key_type != GROUP_KEY_TYPE:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"key_type {request.key_type} is not supported; send "
                "COORDINATOR_KEY_TYPE_GROUP with group ids as keys",
            )
        if len(request.keys) > limits.admin_request_items_max:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{len(request.keys)} keys in one FindCoordinator; send at most "
                f"{limits.admin_request_items_max} per request",
            )
        image = self.driver.image  # one image for every key: one consistent answer
        response = coordinator_pb2.FindCoordinatorResponse()
        for key in request.keys:
            found = control_plane.find_coordinator(
                image,
                request.key_type,
                key,
                offsets_topic_replication_factor=self.defaults.offsets_topic_replication_factor,
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

"""The ControllerService gRPC adapter: requests in, control-plane decisions through the driver.

Thin: decisions are pure functions of `control_plane` over the committed image; this checks
request sizes, routes writes through `ControllerDriver.write` (NOT_CONTROLLER when not active),
fills each answer's `ControllerStatus`, and serves FetchMetadata, FetchSnapshot (metadata_fetch.py).

Calls that act as a broker (RegisterBroker, BrokerHeartbeat with its controlled shutdown,
AlterPartition, ReportCorruptReplica, AllocateProducerIds) first prove that they come from that
broker with the cluster's membership proof (`_require_member`, services/runtime/membership.py),
else PERMISSION_DENIED before anything is read or written; coordinators likewise, signed as
their id (`_require_coordinator`). Admin calls and reads: ACLs decide, when authorization is on.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.request_counts import too_many
from samsa.metadata.acls import Operation
from samsa.services.controller import control_plane, metadata_fetch
from samsa.services.controller.acl_servicer import AclRpcs
from samsa.services.controller.driver import ControllerDriver, NotControllerError
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.lookup_servicer import require_coordinator
from samsa.services.controller.quorum import MetadataBatchTooLargeError
from samsa.services.controller.quorum_servicer import QuorumRpcs
from samsa.services.controller.quota_servicer import ClientQuotaRpcs
from samsa.services.controller.scram_servicer import ScramRpcs
from samsa.services.controller.topic_write_servicer import TopicWriteRpcs
from samsa.services.runtime import caller, member_auth, membership
from samsa.services.runtime.topic_admin_access import per_config_resource
from samsa.v1 import controller_pb2
from samsa.v1.controller_pb2_grpc import ControllerServiceServicer

log = logging.getLogger(__name__)

Response = TypeVar("Response")

# A Describe* that asks for an offset this controller has not applied waits at most this long.
READ_YOUR_WRITES_WAIT_S = 5.0

SERVICE_NAME = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name


def now_ms() -> int:
    return int(time.time() * 1000)


class ControllerServicer(
    AclRpcs, ClientQuotaRpcs, ScramRpcs, QuorumRpcs, TopicWriteRpcs, ControllerServiceServicer
):
    """Serves ControllerService from one controller's driver (mixins: ACLs, quotas, SCRAM
    credentials, quorum, topic writes)."""

    def __init__(
        self,
        *,
        driver: ControllerDriver,
        liveness: BrokerLiveness,
        coordinator_liveness: BrokerLiveness | None = None,
        controller_endpoints: Mapping[int, str],
        defaults: control_plane.ClusterDefaults,
        cluster_id: str,
        member_key: bytes,
        controller_internal_endpoints: Mapping[int, str] | None = None,
        authorizer_enabled: bool = False,
    ) -> None:
        self.authorizer_enabled = authorizer_enabled  # authorizer.class.name is set
        self.member_key = member_key  # membership.derive_key(cluster secret)
        self.driver = driver
        self.liveness = liveness
        # Coordinator sessions: the same mechanism as brokers', keyed by coordinator id.
        self.coordinator_liveness = coordinator_liveness or BrokerLiveness()
        self.controller_endpoints = dict(controller_endpoints)
        # The controllers' internal listeners, where known: redirects name them too.
        self.controller_internal_endpoints = dict(controller_internal_endpoints or {})
        self.defaults = defaults
        self.cluster_id = cluster_id
        self.rng = random.Random()

    # --- helpers -----------------------------------------------------------------------------

    def _status(
        self,
        error_code: int = ErrorCode.NONE,
        message: str = "",
        active_node_id: int | None = None,
        offset: int | None = None,
    ) -> controller_pb2.ControllerStatus:
        status = controller_pb2.ControllerStatus(
            error_code=error_code,  # type: ignore[arg-type]
            error_message=message,
            metadata_offset=self.driver.image.end_offset if offset is None else offset,
        )
        active = self._active_node_id() if active_node_id is None else active_node_id
        if active is not None and active in self.controller_endpoints:
            status.active_controller.node_id = active
            status.active_controller.endpoint = self.controller_endpoints[active]
            internal = self.controller_internal_endpoints.get(active, "")
            status.active_controller.internal_endpoint = internal
        return status

    def _active_node_id(self) -> int | None:
        """The active controller as this one knows it; not itself while elected but not yet
        active (its barrier is not applied), when it refuses writes NOT_CONTROLLER."""
        active = self.driver.active_node_id
        if active == self.driver.node_id and not self.driver.active:
            return None
        return active

    async def _write(
        self, response_type: type[Response], generate: Callable[[Any], Any]
    ) -> Response:
        """Commit what `generate(image)` decides; the response with its status filled."""
        try:
            written = await self.driver.write(generate)
        except NotControllerError as error:
            response = response_type()
            response.status.CopyFrom(  # type: ignore[attr-defined]
                self._status(ErrorCode.NOT_CONTROLLER, str(error), error.active_node_id)
            )
            return response
        except MetadataBatchTooLargeError as error:
            response = response_type()
            response.status.CopyFrom(  # type: ignore[attr-defined]
                self._status(
                    ErrorCode.INVALID_REQUEST,
                    f"this request would commit too much metadata at once ({error}): name "
                    "fewer topics or partitions per request",
                )
            )
            return response
        response = written.response
        # The control plane may have set a request-level error (e.g. STALE_BROKER_EPOCH): keep it.
        status = self._status(
            response.status.error_code, response.status.error_message, None, written.metadata_offset
        )
        response.status.CopyFrom(status)
        return response

    async def _read_at(self, min_offset: int, context: grpc.aio.ServicerContext) -> None:
        if min_offset < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "min_metadata_offset must be >= 0"
            )
        bound = self.driver.metadata_offset_bound()
        if bound is not None and min_offset > bound + limits.metadata_offset_ahead_max:
            await self._refuse_beyond_committed(min_offset, context)  # absurd: at once
        if not await self.driver.wait_for_offset(min_offset, READ_YOUR_WRITES_WAIT_S):
            # Beyond what the active controller can have committed, no retry reaches it. Checked
            # only after the wait: a leader cut off from its quorum believes it is active until
            # pysyncobj's leader fallback (5 s, no longer than the wait), while the new leader
            # commits offsets this one never saw. A follower cannot tell (driver's
            # metadata_offset_bound): it answers UNAVAILABLE, and the active one decides.
            await self._refuse_beyond_committed(min_offset, context)
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"this controller has applied the metadata log up to offset "
                f"{self.driver.image.end_offset}, not yet {min_offset}; retry or ask another",
            )

    async def _refuse_beyond_committed(
        self, min_offset: int, context: grpc.aio.ServicerContext
    ) -> None:
        bound = self.driver.metadata_offset_bound()
        if bound is not None and min_offset > bound:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"min_metadata_offset {min_offset} is beyond the committed metadata log, which "
                f"ends at offset {self.driver.image.end_offset} on the active controller; send "
                "an offset a controller returned (status.metadata_offset), or 0 for any",
            )

    async def _require_member(
        self, context: grpc.aio.ServicerContext, method: str, broker_id: int
    ) -> None:
        """Abort PERMISSION_DENIED unless this call to `method` proves it comes from broker
        `broker_id` (the id the request claims). The first line of every member-only RPC."""
        await member_auth.require_member(
            context,
            self.member_key,
            membership.method_path(SERVICE_NAME, method),
            broker_id,
            f"{method} as broker_id={broker_id}",
        )

    async def _require_coordinator(
        self, context: grpc.aio.ServicerContext, method: str, coordinator_id: int
    ) -> None:
        """Abort PERMISSION_DENIED unless this call proves it comes from coordinator
        `coordinator_id` (signed with the cluster secret, like a broker's calls)."""
        path = membership.method_path(SERVICE_NAME, method)
        await require_coordinator(context, self.member_key, path, coordinator_id, method)

    @staticmethod
    async def _check_count(context: grpc.aio.ServicerContext, what: str, count: int) -> None:
        message = too_many(count, what, limits.admin_request_items_max)
        if message is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    # --- broker lifecycle ---------------------------------------------------------------------

    async def RegisterBroker(self, request, context):
        await self._require_member(context, "RegisterBroker", request.broker_id)
        if request.broker_id < 0 or not request.endpoint or not request.incarnation_id:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "RegisterBroker needs broker_id >= 0, an endpoint and an incarnation_id",
            )
        now = now_ms()
        response = await self._write(
            controller_pb2.RegisterBrokerResponse,
            lambda image: control_plane.register_broker(
                image,
                request,
                liveness=self.liveness,
                now_ms=now,
                session_timeout_ms=self.defaults.broker_session_timeout_ms,
            ),
        )
        if response.status.error_code == ErrorCode.NONE:
            self.liveness.heartbeat(request.broker_id, response.broker_epoch, now_ms())
        return response

    async def BrokerHeartbeat(self, request, context):
        await self._require_member(context, "BrokerHeartbeat", request.broker_id)
        image = self.driver.image
        broker = image.brokers.get(request.broker_id)
        if (
            self.driver.active
            and broker is not None
            and broker.broker_epoch == request.broker_epoch
        ):
            self.liveness.heartbeat(request.broker_id, request.broker_epoch, now_ms())
            self.broker_observed(request)
        return await self._write(
            controller_pb2.BrokerHeartbeatResponse,
            lambda image: control_plane.broker_heartbeat(image, request),
        )

    # --- coordinator lifecycle ----------------------------------------------------------------

    async def RegisterCoordinator(self, request, context):
        await self._require_coordinator(context, "RegisterCoordinator", request.coordinator_id)
        if request.coordinator_id < 0 or not request.endpoint or not request.incarnation_id:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "RegisterCoordinator needs coordinator_id >= 0, an endpoint and an incarnation_id",
            )
        now = now_ms()
        response = await self._write(
            controller_pb2.RegisterCoordinatorResponse,
            lambda image: control_plane.register_coordinator(
                image,
                request,
                liveness=self.coordinator_liveness,
                now_ms=now,
                session_timeout_ms=self.defaults.coordinator_session_timeout_ms,
            ),
        )
        if response.status.error_code == ErrorCode.NONE:
            epoch = response.coordinator_epoch
            self.coordinator_liveness.heartbeat(request.coordinator_id, epoch, now_ms())
        else:
            response.coordinator_epoch = -1  # NOT_CONTROLLER too: no epoch
        return response

    async def CoordinatorHeartbeat(self, request, context):
        await self._require_coordinator(context, "CoordinatorHeartbeat", request.coordinator_id)
        if request.coordinator_epoch < 0 or request.metadata_offset < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                "CoordinatorHeartbeat needs coordinator_epoch >= 0 and metadata_offset >= 0",
            )
        coordinator = self.driver.image.coordinators.get(request.coordinator_id)
        if (
            self.driver.active
            and coordinator is not None
            and not coordinator.fenced
            and coordinator.coordinator_epoch == request.coordinator_epoch
        ):
            self.coordinator_liveness.heartbeat(
                request.coordinator_id, request.coordinator_epoch, now_ms()
            )
            self.coordinator_observed(request)
        return await self._write(
            controller_pb2.CoordinatorHeartbeatResponse,
            lambda image: control_plane.coordinator_heartbeat(image, request),
        )

    # --- metadata following --------------------------------------------------------------------

    async def FetchMetadata(self, request, context):
        if request.end_offset < 0 or request.max_wait_ms < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "end_offset and max_wait_ms must be >= 0"
            )
        answer = await metadata_fetch.answer_fetch(self.driver, request)
        return metadata_fetch.fetch_response(
            answer, self._status(), self.cluster_id, self.controller_endpoints
        )

    async def FetchSnapshot(self, request, context):
        try:
            chunk = metadata_fetch.snapshot_chunk(self.driver, request)
        except metadata_fetch.SnapshotNotFoundError as error:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(error))
        except ValueError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        return controller_pb2.FetchSnapshotResponse(status=self._status(), chunk=chunk)

    # --- administration -------------------------------------------------------------------------

    async def AlterPartitionReassignments(self, request, context):
        await self._check_count(context, "partitions", len(request.partitions))
        return await self._write(
            controller_pb2.AlterPartitionReassignmentsResponse,
            lambda image: control_plane.alter_partition_reassignments(image, request),
        )

    async def ElectLeaders(self, request, context):
        await self._check_count(context, "partitions", len(request.partitions))
        return await self._write(
            controller_pb2.ElectLeadersResponse,
            lambda image: control_plane.elect_leaders(image, request),
        )

    async def UnregisterBroker(self, request, context):
        now = now_ms()
        response = await self._write(
            controller_pb2.UnregisterBrokerResponse,
            lambda image: control_plane.unregister_broker(
                image,
                request,
                liveness=self.liveness,
                now_ms=now,
                session_timeout_ms=self.defaults.broker_session_timeout_ms,
            ),
        )
        if response.status.error_code == ErrorCode.NONE:
            # Committed: no session of it is left to expire (its id may come back as new).
            self.liveness.forget(request.broker_id)
        return response

    async def IncrementalAlterConfigs(self, request, context):
        await self._check_count(context, "resources", len(request.resources))
        return await per_config_resource(  # per resource (topic_admin_access.py)
            Operation.ALTER_CONFIGS,
            request,
            lambda allowed: self._write(
                controller_pb2.IncrementalAlterConfigsResponse,
                lambda image: control_plane.incremental_alter_configs(image, allowed),
            ),
        )

    async def AlterPartition(self, request, context):
        await self._require_member(context, "AlterPartition", request.broker_id)
        # Refused whole rather than answered per item: our brokers chunk by this same limit, so
        # only a broken or hostile member sends more, and it learns at once, before any work.
        message = too_many(
            len(request.partitions),
            "partitions",
            limits.alter_partition_items_max,
            " (limits.alter_partition_items_max)",
        )
        if message is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
        return await self._write(
            controller_pb2.AlterPartitionResponse,
            lambda image: control_plane.alter_partition(image, request),
        )

    async def ReportCorruptReplica(self, request, context):
        await self._require_member(context, "ReportCorruptReplica", request.broker_id)
        return await self._write(
            controller_pb2.ReportCorruptReplicaResponse,
            lambda image: control_plane.report_corrupt_replica(image, request),
        )

    async def AllocateProducerIds(self, request, context):
        await self._require_member(context, "AllocateProducerIds", request.broker_id)
        response = await self._write(
            controller_pb2.AllocateProducerIdsResponse,
            lambda image: control_plane.allocate_producer_ids(image, request),
        )
        if response.status.error_code != ErrorCode.NONE:  # NOT_CONTROLLER too: no block
            response.producer_id_start, response.producer_id_len = -1, 0
        return response

    async def DescribeCluster(self, request, context):
        await self._read_at(request.min_metadata_offset, context)
        response = control_plane.describe_cluster(
            self.driver.image,
            cluster_id=self.cluster_id,
            controllers=self.controller_endpoints,
            active_node_id=self._active_node_id(),
        )
        response.status.CopyFrom(self._status())
        return response

    async def DescribeTopics(self, request, context):
        await self._check_count(context, "topics", len(request.names))
        problem = control_plane.describe_topics_problem(request)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        await self._read_at(request.min_metadata_offset, context)
        visible, who = caller.topics_visible(), caller.current_caller()  # caller.py
        response = control_plane.describe_topics(self.driver.image, request, visible, who.principal)
        response.status.CopyFrom(self._status())
        return response

    async def DescribeConfigs(self, request, context):
        await self._check_count(context, "resources", len(request.resources))
        await self._read_at(request.min_metadata_offset, context)
        image = self.driver.image
        response = await per_config_resource(  # per resource (topic_admin_access.py)
            Operation.DESCRIBE_CONFIGS,
            request,
            lambda allowed: control_plane.describe_configs(image, allowed),
        )
        response.status.CopyFrom(self._status())
        return response

    async def ListPartitionReassignments(self, request, context):
        await self._check_count(context, "topics", len(request.topics))
        await self._read_at(request.min_metadata_offset, context)
        image = self.driver.image
        response = control_plane.list_partition_reassignments(image, request)
        response.metadata_offset = image.end_offset
        return response

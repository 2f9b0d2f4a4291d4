"""ControllerService on a broker, so that `bootstrap.servers` may list brokers (as in Kafka).

Theory of operation (KIP-590). A client that knows only brokers asks them what it would ask a
controller:

- DescribeCluster, DescribeTopics, DescribeConfigs, ListPartitionReassignments,
  DescribeClientQuotas and DescribeUserScramCredentials are answered
  from this broker's own replica of the metadata log, with the same pure functions a controller
  uses (services/runtime/metadata_reads.py), so the answers are the same as of the image's
  offset. The controllers listed, the active one and the cluster id are those the last
  FetchMetadata answer named (`MetadataLogFollower.quorum`). A read asking for a
  `min_metadata_offset` this broker has not applied waits up to READ_YOUR_WRITES_WAIT_S for the
  log to bring it, then answers UNAVAILABLE (the client retries, on another server when it has
  one); so does a read before the broker has followed the log at all, rather than answer from an
  empty image.
- CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
  AlterPartitionReassignments, UnregisterBroker, ElectLeaders, AlterClientQuotas,
  AlterUserScramCredentials, CreateAcls and DeleteAcls are forwarded to the active controller,
  and so are DescribeQuorum, which only it can answer, and DescribeAcls (whose
  SECURITY_DISABLED is the controller's to say), through the channel the broker already keeps
  (`ControllerChannel.write`, which follows NOT_CONTROLLER redirects), and the controller's
  answer is answered as it is: its status carries the metadata offset of the write, which the
  client then asks its reads for. When no active controller answers in time the answer is
  NOT_CONTROLLER, which clients retry; a controller's refusal with a gRPC status
  (INVALID_ARGUMENT, RESOURCE_EXHAUSTED) is passed on.
- The RPCs only cluster members send (registration, heartbeats, FetchMetadata, FetchSnapshot,
  AlterPartition, …) are not forwarded: a broker answers them UNIMPLEMENTED, saying to send them
  to a controller.

The limits on topics and resources per request are the controller's, checked before forwarding.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.request_counts import too_many
from samsa.metadata.acls import Operation
from samsa.metadata.image import MetadataImage
from samsa.services.runtime import caller, metadata_reads
from samsa.services.runtime.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.services.runtime.metadata_log import MetadataLogFollower
from samsa.services.runtime.scram_reads import describe_user_scram_credentials
from samsa.services.runtime.topic_admin_access import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    per_config_resource,
    per_topic,
)
from samsa.v1 import controller_pb2, controller_pb2_grpc

# As the controller's: a read asking for an offset not yet applied here waits at most this long.
READ_YOUR_WRITES_WAIT_S = 5.0
# A forwarded write waits at most this long for the active controller (less when the client's own
# deadline is nearer), then answers NOT_CONTROLLER.
FORWARD_TIMEOUT_S = 8.0
# Kept of the client's deadline to send the answer back.
FORWARD_DEADLINE_MARGIN_S = 0.2


class BrokerMetadataServicer(controller_pb2_grpc.ControllerServiceServicer):
    """Metadata reads from this broker's image; admin writes forwarded to the active controller."""

    def __init__(
        self, *, broker_id: int, metadata: MetadataLogFollower, controllers: ControllerChannel
    ) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.controllers = controllers

    # --- helpers -----------------------------------------------------------------------------

    def _status(self) -> controller_pb2.ControllerStatus:
        quorum = self.metadata.quorum
        status = controller_pb2.ControllerStatus(metadata_offset=self.metadata.image.end_offset)
        active = quorum.active_node_id
        if active is not None and active in quorum.controllers:
            status.active_controller.node_id = active
            status.active_controller.endpoint = quorum.controllers[active]
        return status

    async def _image_at(self, min_offset: int, context: grpc.aio.ServicerContext) -> MetadataImage:
        """This broker's image once it has applied `min_offset`; aborts when it cannot."""
        if min_offset < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "min_metadata_offset must be >= 0"
            )
        if self.metadata.last_answered_fetch_sent is not None:
            bound = self.metadata.quorum.committed_end_offset + limits.metadata_offset_ahead_max
            if min_offset > bound:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"min_metadata_offset {min_offset} is far beyond the committed metadata log "
                    f"(offset {self.metadata.quorum.committed_end_offset} when broker "
                    f"{self.broker_id} last read it); send an offset a controller or broker "
                    "returned (status.metadata_offset), or 0 for any",
                )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READ_YOUR_WRITES_WAIT_S
        while not self._caught_up(min_offset) and loop.time() < deadline:
            await self.metadata.wait_for_change(deadline - loop.time())
        if not self._caught_up(min_offset):
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"broker {self.broker_id} has applied the metadata log up to offset "
                f"{self.metadata.image.end_offset}, not yet {min_offset}; retry or ask another",
            )
        return self.metadata.image

    def _caught_up(self, min_offset: int) -> bool:
        followed = self.metadata.last_answered_fetch_sent is not None
        return followed and self.metadata.image.end_offset >= min_offset

    @staticmethod
    async def _check_count(context: grpc.aio.ServicerContext, what: str, count: int) -> None:
        message = too_many(count, what, limits.admin_request_items_max)
        if message is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    async def _forward(
        self,
        method: str,
        request: Any,
        response_type: Callable[[], Any],
        context: grpc.aio.ServicerContext,
    ) -> Any:
        """The active controller's answer to `request`, or NOT_CONTROLLER when none answered."""
        remaining = context.time_remaining()
        timeout_s = FORWARD_TIMEOUT_S
        if remaining is not None:
            timeout_s = max(0.1, min(timeout_s, remaining - FORWARD_DEADLINE_MARGIN_S))
        try:
            return await self.controllers.write(method, request, timeout_s)
        except ControllerUnavailableError as error:
            response = response_type()
            response.status.CopyFrom(self._status())
            response.status.error_code = ErrorCode.NOT_CONTROLLER
            response.status.error_message = (
                f"broker {self.broker_id} forwarded {method} but no active controller "
                f"answered ({error}); retry"
            )
            return response
        except grpc.aio.AioRpcError as error:  # the controller refused it whole: pass it on
            await context.abort(error.code(), error.details() or "")

    # --- reads from this broker's image -------------------------------------------------------

    async def DescribeCluster(self, request, context):
        image = await self._image_at(request.min_metadata_offset, context)
        quorum = self.metadata.quorum
        response = metadata_reads.describe_cluster(
            image,
            cluster_id=quorum.cluster_id,
            controllers=quorum.controllers,
            active_node_id=quorum.active_node_id,
        )
        response.status.CopyFrom(self._status())
        return response

    async def DescribeTopics(self, request, context):
        await self._check_count(context, "topics", len(request.names))
        problem = metadata_reads.describe_topics_problem(request)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        image = await self._image_at(request.min_metadata_offset, context)
        who = caller.current_caller()  # filtered, or refused per topic: caller.py
        response = metadata_reads.describe_topics(
            image, request, caller.topics_visible(), who.principal
        )
        response.status.CopyFrom(self._status())
        return response

    async def DescribeConfigs(self, request, context):
        await self._check_count(context, "resources", len(request.resources))
        image = await self._image_at(request.min_metadata_offset, context)
        response = await per_config_resource(  # per resource (topic_admin_access.py)
            Operation.DESCRIBE_CONFIGS,
            request,
            lambda allowed: metadata_reads.describe_configs(image, allowed),
        )
        response.status.CopyFrom(self._status())
        return response

    async def ListPartitionReassignments(self, request, context):
        await self._check_count(context, "topics", len(request.topics))
        image = await self._image_at(request.min_metadata_offset, context)
        response = metadata_reads.list_partition_reassignments(image, request)
        response.metadata_offset = image.end_offset
        return response

    async def DescribeClientQuotas(self, request, context):
        problem = metadata_reads.describe_client_quotas_problem(request)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        image = await self._image_at(request.min_metadata_offset, context)
        response = metadata_reads.describe_client_quotas(image, request)
        response.status.CopyFrom(self._status())
        return response

    async def DescribeUserScramCredentials(self, request, context):
        await self._check_count(context, "users", len(request.users))
        image = await self._image_at(request.min_metadata_offset, context)
        response = describe_user_scram_credentials(image.scram_credentials, request)
        response.status.CopyFrom(self._status())
        return response

    # --- writes, forwarded to the active controller ---------------------------------------------

    # The topics the caller may not touch are answered here, per topic; the others forwarded.
    async def CreateTopics(self, request, context):
        await self._check_count(context, "topics", len(request.topics))
        return await per_topic(
            CREATE_TOPICS,
            request,
            lambda allowed: self._forward(
                "CreateTopics", allowed, controller_pb2.CreateTopicsResponse, context
            ),
        )

    async def DeleteTopics(self, request, context):
        await self._check_count(context, "topics", len(request.names))
        return await per_topic(
            DELETE_TOPICS,
            request,
            lambda allowed: self._forward(
                "DeleteTopics", allowed, controller_pb2.DeleteTopicsResponse, context
            ),
        )

    async def CreatePartitions(self, request, context):
        await self._check_count(context, "topics", len(request.topics))
        return await per_topic(
            CREATE_PARTITIONS,
            request,
            lambda allowed: self._forward(
                "CreatePartitions", allowed, controller_pb2.CreatePartitionsResponse, context
            ),
        )

    async def IncrementalAlterConfigs(self, request, context):
        await self._check_count(context, "resources", len(request.resources))
        return await per_config_resource(
            Operation.ALTER_CONFIGS,
            request,
            lambda allowed: self._forward(
                "IncrementalAlterConfigs",
                allowed,
                controller_pb2.IncrementalAlterConfigsResponse,
                context,
            ),
        )

    async def AlterPartitionReassignments(self, request, context):
        await self._check_count(context, "partitions", len(request.partitions))
        return await self._forward(
            "AlterPartitionReassignments",
            request,
            controller_pb2.AlterPartitionReassignmentsResponse,
            context,
        )

    async def UnregisterBroker(self, request, context):
        return await self._forward(
            "UnregisterBroker", request, controller_pb2.UnregisterBrokerResponse, context
        )

    async def ElectLeaders(self, request, context):
        await self._check_count(context, "partitions", len(request.partitions))
        return await self._forward(
            "ElectLeaders", request, controller_pb2.ElectLeadersResponse, context
        )

    async def AlterClientQuotas(self, request, context):
        await self._check_count(context, "entries", len(request.entries))
        return await self._forward(
            "AlterClientQuotas", request, controller_pb2.AlterClientQuotasResponse, context
        )

    async def AlterUserScramCredentials(self, request, context):
        count = len(request.deletions) + len(request.upsertions)
        await self._check_count(context, "SCRAM credential changes", count)
        return await self._forward(
            "AlterUserScramCredentials",
            request,
            controller_pb2.AlterUserScramCredentialsResponse,
            context,
        )

    async def CreateAcls(self, request, context):
        await self._check_count(context, "ACL bindings", len(request.creations))
        return await self._forward(
            "CreateAcls", request, controller_pb2.CreateAclsResponse, context
        )

    async def DeleteAcls(self, request, context):
        await self._check_count(context, "ACL filters", len(request.filters))
        return await self._forward(
            "DeleteAcls", request, controller_pb2.DeleteAclsResponse, context
        )

    async def DescribeAcls(self, request, context):
        return await self._forward(
            "DescribeAcls", request, controller_pb2.DescribeAclsResponse, context
        )

    async def DescribeQuorum(self, request, context):
        # Only the active controller knows the quorum's replication state: forwarded, as a write.
        return await self._forward(
            "DescribeQuorum", request, controller_pb2.DescribeQuorumResponse, context
        )

    # --- what only cluster members send, to a controller: not forwarded -----------------------

    async def RegisterBroker(self, request, context):
        await _refuse_member_rpc(context, "RegisterBroker")

    async def BrokerHeartbeat(self, request, context):
        await _refuse_member_rpc(context, "BrokerHeartbeat")

    async def FetchMetadata(self, request, context):
        await _refuse_member_rpc(context, "FetchMetadata")

    async def FetchSnapshot(self, request, context):
        await _refuse_member_rpc(context, "FetchSnapshot")

    async def AlterPartition(self, request, context):
        await _refuse_member_rpc(context, "AlterPartition")

    async def ReportCorruptReplica(self, request, context):
        await _refuse_member_rpc(context, "ReportCorruptReplica")

    async def AllocateProducerIds(self, request, context):
        await _refuse_member_rpc(context, "AllocateProducerIds")

    async def RegisterCoordinator(self, request, context):
        await _refuse_member_rpc(context, "RegisterCoordinator")

    async def CoordinatorHeartbeat(self, request, context):
        await _refuse_member_rpc(context, "CoordinatorHeartbeat")


async def _refuse_member_rpc(context: grpc.aio.ServicerContext, method: str) -> None:
    # The generated base would answer UNIMPLEMENTED too, but only "Method not implemented!".
    await context.abort(
        grpc.StatusCode.UNIMPLEMENTED,
        f"{method} is served by the controllers only and brokers do not forward it: send it to a "
        "controller (brokers forward only CreateTopics, DeleteTopics, CreatePartitions, "
        "IncrementalAlterConfigs, AlterPartitionReassignments, UnregisterBroker, ElectLeaders, "
        "AlterClientQuotas, AlterUserScramCredentials, CreateAcls, DeleteAcls, DescribeAcls and "
        "DescribeQuorum)",
    )

"""GroupCoordinatorService: the gRPC adapter between clients and the owned partitions' shards.

Theory of operation. Each request names a group; the group lives in partition
hash(group) mod N of `__consumer_offsets` (`Coordinator.partition_for`), which this process must
own and have loaded — otherwise the answer is NOT_COORDINATOR (find the coordinator again) or
COORDINATOR_LOAD_IN_PROGRESS (retry shortly). The handler runs on that partition's shard, its
records are queued with `OffsetsPartition.write` before any await, and the answer goes out once they
are durable. A read (`read_durable`) takes its answer from the shard first, then waits the same
way, with no records, for the writes queued before it: the shard then held their records and no
later ones, so no answer shows state the log does not hold yet. (Read after the wait, it showed
what handlers applied meanwhile, still in flight: a commit or a deletion a fenced writer then
never wrote.) Requests naming several groups (DescribeGroups, DeleteGroups) are split by
partition and answered in request order; ListGroups merges every owned partition.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.common.request_counts import named_twice, too_many, too_many_nested
from samsa.metadata.acls import Operation, ResourceType, authorize
from samsa.services.coordinator.commit_access import per_topic_commit
from samsa.services.coordinator.coordinator_partition import PartitionUnavailableError
from samsa.services.coordinator.group_assignment import UNJUDGED, MemberAccess
from samsa.services.coordinator.group_describe_access import shown_to
from samsa.services.coordinator.group_offsets import commit_size_problem, commit_write_error
from samsa.services.coordinator.offsets_log import OffsetResult
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.services.runtime import caller
from samsa.v1 import broker_pb2, coordinator_pb2_grpc
from samsa.v1 import coordinator_pb2 as c

if TYPE_CHECKING:
    from samsa.services.coordinator.coordinator import Coordinator


def _undescribable_topics(request: c.ConsumerGroupHeartbeatRequest) -> list[str]:
    """The subscribed topic names the caller may not DESCRIBE (KIP-848, as Kafka's
    ConsumerGroupHeartbeat refuses them with TOPIC_AUTHORIZATION_FAILED): the subscription
    names them only when it changes, so it is checked then. A regex subscription is filtered
    per member instead (`_member_access`, group_assignment.py)."""
    if not request.HasField("subscription") or not request.subscription.topic_names:
        return []
    may_describe = caller.topics_visible()
    return sorted({n for n in request.subscription.topic_names if not may_describe(n)})


def _now_ms() -> int:
    return int(time.time() * 1000)


OffsetsRequest = c.OffsetCommitRequest | c.OffsetFetchRequest | c.OffsetDeleteRequest
Answer = TypeVar("Answer")


async def read_durable(partition: OffsetsPartition, read: Callable[[], Answer]) -> Answer:
    """`read()` of the partition's shard as it is now, returned once every write queued so far
    (what that state rests on) is durable. Raises PartitionUnavailableError as `write` does."""
    partition.check_serving()
    answer = read()
    await partition.write([])
    return answer


def partitions_problem(request: OffsetsRequest) -> str | None:
    """Why an offsets request is refused for the partitions or topic entries it names, if it is
    (as a broker's Produce and Fetch are): looking at them would hold the event loop, and every
    group here, meanwhile (common/request_counts.py). The SDK tests' fake coordinator calls it."""
    return too_many_nested(
        sum(len(topic.partitions) for topic in request.topics),
        "partitions",
        entries=len(request.topics),
        limit=limits.request_partitions_max,
    )


class GroupCoordinatorServicer(coordinator_pb2_grpc.GroupCoordinatorServiceServicer):
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    async def _check_items(self, count: int, what: str, context: grpc.aio.ServicerContext) -> None:
        message = too_many(count, what, limits.admin_request_items_max)
        if message is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    async def _check_group_ids(
        self, group_ids: list[str], context: grpc.aio.ServicerContext
    ) -> None:
        """DescribeGroups and DeleteGroups: at most admin_request_items_max ids, each once."""
        await self._check_items(len(group_ids), "group ids", context)
        if (message := named_twice(group_ids, "group id")) is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)

    def _member_access(self) -> MemberAccess:
        """Who calls (recorded in its member's metadata) and the judge of any member's DESCRIBE
        under the ACLs of the coordinator's image now (read once per heartbeat); UNJUDGED with
        authorization off, when nobody is judged and every member's regex is unfiltered."""
        authorizer, who = self.coordinator.authorizer, caller.current_caller()
        if authorizer is None or who is caller.EVERYONE:
            return UNJUDGED
        grant = who.grant()
        if not grant.principal:
            return UNJUDGED
        acls, settings = self.coordinator.metadata.image.acls, authorizer.settings

        def may_describe(principal: str, host: str, topic: str) -> bool:
            return authorize(
                acls, settings, principal, host, Operation.DESCRIBE, ResourceType.TOPIC, topic
            )

        return MemberAccess(grant.principal, grant.host, may_describe)

    async def _check_partitions(
        self, request: OffsetsRequest, context: grpc.aio.ServicerContext
    ) -> None:
        message = partitions_problem(request)
        if message is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    async def ConsumerGroupHeartbeat(self, request, context):
        size = request.ByteSize()
        if size > limits.group_heartbeat_request_bytes_max:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"the heartbeat is {size} bytes, over {limits.group_heartbeat_request_bytes_max}: "
                "its member's record would not fit __consumer_offsets (subscribe by regex, or "
                "shorten client_id and group_instance_id)",
            )
        refused = _undescribable_topics(request)
        if refused:
            return c.ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,  # type: ignore[arg-type]
                error_message=f"{caller.current_caller().principal()} may not DESCRIBE the "
                f"subscribed topic(s) {', '.join(refused)}: grant it (samsa acls --add "
                "--operation Describe --topic ...) or subscribe to other topics",
                member_id=request.member_id,
                member_epoch=request.member_epoch,
            )
        try:
            partition = self.coordinator.partition_for(request.group_id)
            access = self._member_access()
            result = partition.shard.heartbeat(request, _now_ms(), self.coordinator.topics, access)
            await partition.write(result.records)
        except PartitionUnavailableError as error:
            return c.ConsumerGroupHeartbeatResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
                member_id=request.member_id,
                member_epoch=-1,
            )
        return result.response

    async def OffsetCommit(self, request, context):
        await self._check_partitions(request, context)
        if (problem := commit_size_problem(request, _now_ms())) is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, problem)
        return await per_topic_commit(request, self._commit)

    async def _commit(self, request: c.OffsetCommitRequest) -> c.OffsetCommitResponse:
        try:
            partition = self.coordinator.partition_for(request.group_id)
            coordinator = self.coordinator
            result = partition.shard.commit_offsets(
                request, _now_ms(), coordinator.topics, coordinator.topic_ids
            )
            await partition.write(result.records)
        except PartitionUnavailableError as error:
            return _commit_failed(request, error)
        return result.response

    async def OffsetFetch(self, request, context):
        await self._check_partitions(request, context)
        try:
            partition = self.coordinator.partition_for(request.group_id)
            topics = caller.topics_visible()  # every topic of the group: those it may DESCRIBE
            return await read_durable(
                partition, lambda: partition.shard.fetch_offsets(request, topics)
            )
        except PartitionUnavailableError as error:
            return c.OffsetFetchResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
            )

    async def ListGroups(self, request, context):
        # Each owned partition filters by it: a huge one would hold the event loop meanwhile.
        await self._check_items(len(request.states_filter), "state filters", context)
        response = c.ListGroupsResponse()
        loading: list[int] = []
        if not self.coordinator.in_touch():
            return c.ListGroupsResponse(
                error_code=ErrorCode.NOT_COORDINATOR,  # type: ignore[arg-type]
                error_message="this coordinator has lost touch with the controllers; retry",
            )
        visible = caller.listing_filter(caller.current_caller(), ResourceType.GROUP)
        for partition in self.coordinator.owned_partitions():
            try:
                listed = await read_durable(
                    partition,
                    lambda p=partition: p.shard.list_groups(request.states_filter, visible),
                )
            except PartitionUnavailableError:
                loading.append(partition.partition)
                continue
            response.groups.extend(listed.groups)
        response.groups.sort(key=lambda group: group.group_id)
        if loading:
            response.error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # type: ignore[assignment]
            response.error_message = (
                f"partitions {sorted(loading)} are still loading; their groups are not listed"
            )
        return response

    async def DescribeGroups(self, request, context):
        await self._check_group_ids(request.group_ids, context)
        # A group the caller may not DESCRIBE: GROUP_AUTHORIZATION_FAILED, the others described.
        refused = caller.refused_names(Operation.DESCRIBE, ResourceType.GROUP, request.group_ids)
        described = {g: c.DescribedGroup(group_id=g, **_denied(why)) for g, why in refused.items()}
        allowed = [group_id for group_id in request.group_ids if group_id not in refused]
        for partition, group_ids, error in self._by_partition(allowed):
            if partition is not None and error is None:
                try:
                    answer = await read_durable(
                        partition, lambda p=partition, ids=group_ids: p.shard.describe_groups(ids)
                    )
                except PartitionUnavailableError as failed:
                    error = failed
                else:
                    for group in answer.groups:
                        described[group.group_id] = group
                    continue
            assert error is not None
            for group_id in group_ids:
                described[group_id] = c.DescribedGroup(
                    group_id=group_id,
                    error_code=error.code,  # type: ignore[arg-type]
                    error_message=error.message,
                )
        visible, who = caller.topics_visible(), caller.current_caller()  # group_describe_access
        if visible is not caller.everything:
            described = {
                g: shown_to(group, visible, who.principal()) for g, group in described.items()
            }
        return c.DescribeGroupsResponse(groups=[described[g] for g in request.group_ids])

    async def DeleteGroups(self, request, context):
        await self._check_group_ids(request.group_ids, context)
        # A group the caller may not DELETE: GROUP_AUTHORIZATION_FAILED, the others deleted.
        refused = caller.refused_names(Operation.DELETE, ResourceType.GROUP, request.group_ids)
        deleted = {g: c.DeletedGroup(group_id=g, **_denied(why)) for g, why in refused.items()}
        allowed = [group_id for group_id in request.group_ids if group_id not in refused]
        for partition, group_ids, error in self._by_partition(allowed):
            if partition is not None and error is None:
                try:
                    result = partition.shard.delete_groups(group_ids)
                    await partition.write(result.records)
                except PartitionUnavailableError as failed:
                    error = failed
                else:
                    for group in result.response.groups:
                        deleted[group.group_id] = group
                    continue
            assert error is not None
            for group_id in group_ids:
                deleted[group_id] = c.DeletedGroup(
                    group_id=group_id,
                    error_code=error.code,  # type: ignore[arg-type]
                    error_message=error.message,
                )
        return c.DeleteGroupsResponse(groups=[deleted[g] for g in request.group_ids])

    async def OffsetDelete(self, request, context):
        await self._check_partitions(request, context)
        named = [(t.topic, number) for t in request.topics for number in t.partitions]
        try:
            partition = self.coordinator.partition_for(request.group_id)
            result = partition.shard.delete_offsets(request.group_id, named)
            await partition.write(result.records)
        except PartitionUnavailableError as error:
            return c.OffsetDeleteResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
            )
        return result.response

    async def DescribeGroupLag(self, request, context):
        try:
            partition = self.coordinator.partition_for(request.group_id)
            topics = caller.topics_visible()  # the group's topics the caller may DESCRIBE
            rows = await read_durable(
                partition, lambda: partition.shard.lag_inputs(request.group_id, topics)
            )
        except PartitionUnavailableError as error:
            return c.DescribeGroupLagResponse(
                error_code=error.code,  # type: ignore[arg-type]
                error_message=error.message,
            )
        if rows is None:
            return c.DescribeGroupLagResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,  # type: ignore[arg-type]
                error_message=f"group {request.group_id!r} does not exist",
            )
        ends = await self.coordinator.offsets_log.list_offsets(
            [(topic, number) for topic, number, _, _ in rows], broker_pb2.OFFSET_SPEC_LATEST
        )
        return c.DescribeGroupLagResponse(
            partitions=[
                partition_lag(topic, number, committed, member, ends[(topic, number)])
                for topic, number, committed, member in rows
            ]
        )

    def _by_partition(
        self, group_ids: list[str]
    ) -> list[tuple[OffsetsPartition | None, list[str], PartitionUnavailableError | None]]:
        """The requested groups split by owning partition (each with its lookup error)."""
        groups: dict[int, list[str]] = defaultdict(list)
        owners: dict[int, OffsetsPartition | None] = {}
        errors: dict[int, PartitionUnavailableError | None] = {}
        unplaced: list[tuple[OffsetsPartition | None, list[str], PartitionUnavailableError]] = []
        for group_id in dict.fromkeys(group_ids):
            try:
                owned = self.coordinator.partition_for(group_id)
            except PartitionUnavailableError as error:
                unplaced.append((None, [group_id], error))
                continue
            groups[owned.partition].append(group_id)
            owners[owned.partition] = owned
            errors[owned.partition] = None
        placed = [(owners[p], ids, errors[p]) for p, ids in groups.items()]
        return [*placed, *unplaced]


def partition_lag(
    topic: str, partition: int, committed: int, member_id: str, end: OffsetResult
) -> c.PartitionLag:
    """One row of DescribeGroupLag: the lag is known only with both offsets."""
    log_end = end.offset if not end.error_code else -1
    lag = max(0, log_end - committed) if committed >= 0 and log_end >= 0 else -1
    return c.PartitionLag(
        topic=topic,
        partition=partition,
        committed_offset=committed,
        log_end_offset=log_end,
        lag=lag,
        member_id=member_id,
        error_code=end.error_code,  # type: ignore[arg-type]
    )


def _commit_failed(
    request: c.OffsetCommitRequest, error: PartitionUnavailableError
) -> c.OffsetCommitResponse:
    """Every partition of the request answers the same error."""
    code, message = commit_write_error(error.code, error.message)
    return c.OffsetCommitResponse(
        topics=[
            c.OffsetCommitTopicResult(
                name=topic.name,
                partitions=[
                    c.OffsetCommitPartitionResult(
                        partition=p.partition,
                        error_code=code,  # type: ignore[arg-type]
                        error_message=message,
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _denied(why: str) -> dict[str, Any]:
    """A refused group's error fields (caller.refused_names' message)."""
    return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": why}

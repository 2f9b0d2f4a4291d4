"""The coordinator process's composition: membership, metadata, owned partitions, gRPC.

The coordinator keeps no local state (DESIGN §6): everything lives in `__consumer_offsets`. It
registers and heartbeats with the controllers (coordinator_membership.py), follows the metadata
log (services/runtime/metadata_log.py), and on every new image or epoch works out which
partitions it owns (ownership.py): new ones are loaded (offsets_partition.py), lost ones dropped.
It also works out which partitions of `__transaction_state` it owns
(`owned_transaction_partitions`), but does not load or serve them yet: the transaction
coordinator's adapter over transaction_state.py comes next.
A partition that fails (its writer was fenced, or a write was refused) is loaded again from the
log while it is still owned. It serves GroupCoordinatorService (servicer.py) and, like every
service, FindCoordinator from its own image.

It answers groups only while `in_touch()`: a coordinator cut off from the controllers stops
answering before the controller can have replaced it (writes are fenced on the brokers anyway;
this covers answers from memory, such as a heartbeat that changes nothing). On SIGTERM it gives
its partitions up, asks the controller to fence it (so they move at once), and stops.
"""

from __future__ import annotations

import asyncio
import logging

from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    group_id_problem,
    group_partition,
)
from samsa.metadata.image import CoordinatorAssignment, MetadataImage
from samsa.services.coordinator.coordinator_membership import CoordinatorMembership
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.offsets_log import OffsetsLog
from samsa.services.coordinator.offsets_partition import OwnedPartition, PartitionUnavailableError
from samsa.services.coordinator.ownership import (
    owned_partitions,
    ownership_changes,
    subscribable_topics,
)
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.services.runtime.coordinator_lookup import CoordinatorLookupServicer
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.metadata_log import MetadataLogFollower
from samsa.services.runtime.server import GrpcServer
from samsa.v1 import coordinator_pb2, coordinator_pb2_grpc

log = logging.getLogger(__name__)

STOP_GRACE_S = 2.0
RELOAD_DELAY_S = 0.5


class Coordinator:
    def __init__(
        self,
        *,
        coordinator_id: int,
        listen: str,
        controllers: list[str],
        member_key: bytes,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        group_config: GroupConfig,
        tracing: bool = False,
    ) -> None:
        self.coordinator_id = coordinator_id
        self.listen = listen
        self.tracing = tracing
        self.group_config = group_config
        signer = MemberSigner(member_key, coordinator_id)
        self.channel = ControllerChannel(controllers, signer)
        self.metadata = MetadataLogFollower(self.channel, self._on_image)
        self.membership = CoordinatorMembership(
            coordinator_id=coordinator_id,
            endpoint=listen,
            controllers=self.channel,
            heartbeat_interval_ms=heartbeat_interval_ms,
            session_timeout_ms=session_timeout_ms,
            metadata_offset=lambda: self.metadata.image.end_offset,
            on_epoch_change=lambda: self._reconcile(self.metadata.image),
        )
        self.session_timeout_s = session_timeout_ms / 1000
        self.offsets_log = OffsetsLog(lambda: self.metadata.image, signer)
        self.topics: dict[str, int] = {}
        self._owned: dict[int, CoordinatorAssignment] = {}
        self._partitions: dict[int, OwnedPartition] = {}
        # The partitions of __transaction_state this process owns now, by number (updated on
        # every image and epoch, like the groups' `_owned`); not loaded yet.
        self.owned_transaction_partitions: dict[int, CoordinatorAssignment] = {}
        self._stopping = False

    # --- what the servicer asks -------------------------------------------------------------

    def partition_for(self, group_id: str) -> OwnedPartition:
        """The loaded partition holding `group_id`, or PartitionUnavailableError saying why not."""
        if (problem := group_id_problem(group_id)) is not None:
            raise PartitionUnavailableError(ErrorCode.INVALID_GROUP_ID, problem)
        if not self.in_touch():
            raise PartitionUnavailableError(
                ErrorCode.NOT_COORDINATOR,
                f"coordinator {self.coordinator_id} has lost touch with the controllers and "
                "may have been replaced; find the coordinator again and retry",
            )
        topic = self.metadata.image.topics.get(CONSUMER_OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            raise PartitionUnavailableError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{CONSUMER_OFFSETS_TOPIC} does not exist yet; retry shortly",
            )
        number = group_partition(group_id, len(topic.partitions))
        owned = self._partitions.get(number)
        if owned is None:
            raise PartitionUnavailableError(
                ErrorCode.NOT_COORDINATOR,
                f"group {group_id!r} lives in partition {number} of {CONSUMER_OFFSETS_TOPIC}, "
                f"which coordinator {self.coordinator_id} does not own; find the coordinator "
                "again and retry",
            )
        owned.check_serving()
        return owned

    def in_touch(self) -> bool:
        """Whether this process may answer from memory: its lease with the controller holds
        (coordinator_membership.py) and its image was current within the session timeout, so a
        reassignment of its partitions cannot have gone unseen for longer than that."""
        fetched = self.metadata.last_answered_fetch_sent
        now = asyncio.get_running_loop().time()
        return (
            self.membership.lease_valid()
            and fetched is not None
            and now < fetched + self.session_timeout_s
        )

    def owned_partitions(self) -> list[OwnedPartition]:
        return [self._partitions[p] for p in sorted(self._partitions)]

    # --- ownership --------------------------------------------------------------------------

    async def _on_image(self, old: MetadataImage, new: MetadataImage) -> None:
        if old.topics is not new.topics:
            self.topics = subscribable_topics(new)
        self._reconcile(new)

    def _reconcile(self, image: MetadataImage) -> None:
        owned: dict[int, CoordinatorAssignment] = {}
        owned_transactions: dict[int, CoordinatorAssignment] = {}
        if not self._stopping:
            epoch = self.membership.coordinator_epoch
            owned = owned_partitions(image, CONSUMER_OFFSETS_TOPIC, self.coordinator_id, epoch)
            owned_transactions = owned_partitions(
                image, TRANSACTION_STATE_TOPIC, self.coordinator_id, epoch
            )
        if owned_transactions != self.owned_transaction_partitions:
            log.info(
                "owned partitions of __transaction_state changed (not served yet)",
                extra={"partitions": sorted(owned_transactions)},
            )
        self.owned_transaction_partitions = owned_transactions
        changes = ownership_changes(self._owned, owned)
        self._owned = owned
        for number in changes.drop:
            partition = self._partitions.pop(number, None)
            if partition is not None:
                log.info("partition dropped", extra={"partition": number})
                asyncio.get_running_loop().create_task(partition.stop())
        for assignment in changes.load:
            self._load(assignment)

    def _load(self, assignment: CoordinatorAssignment) -> None:
        partition = OwnedPartition(
            assignment,
            coordinator_id=self.coordinator_id,
            offsets_log=self.offsets_log,
            config=self.group_config,
            on_ended=self._on_partition_ended,
        )
        self._partitions[assignment.partition] = partition
        log.info(
            "loading partition",
            extra={
                "partition": assignment.partition,
                "assignment_epoch": assignment.assignment_epoch,
            },
        )
        partition.start()

    def _on_partition_ended(self, partition: OwnedPartition) -> None:
        """A partition failed on its own: load it again from the log if it is still ours."""
        if self._partitions.get(partition.partition) is not partition:
            return  # dropped on purpose
        del self._partitions[partition.partition]
        asyncio.get_running_loop().call_later(
            RELOAD_DELAY_S, self._reload, partition.partition, partition.assignment
        )

    def _reload(self, number: int, assignment: CoordinatorAssignment) -> None:
        if self._owned.get(number) == assignment and number not in self._partitions:
            self._load(assignment)

    # --- running ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        services = [
            coordinator_pb2.DESCRIPTOR.services_by_name[name].full_name
            for name in ("GroupCoordinatorService", "CoordinatorLookupService")
        ]
        server = GrpcServer(self.listen, services, tracing=self.tracing)
        coordinator_pb2_grpc.add_GroupCoordinatorServiceServicer_to_server(
            GroupCoordinatorServicer(self), server.server
        )
        coordinator_pb2_grpc.add_CoordinatorLookupServiceServicer_to_server(
            CoordinatorLookupServicer(
                image=lambda: self.metadata.image,
                offsets_topic_replication_factor=None,
                transaction_state_log_replication_factor=None,
            ),
            server.server,
        )
        await server.start()
        log.info(
            "coordinator serving",
            extra={"coordinator_id": self.coordinator_id, "listen": self.listen},
        )
        follower_stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self.metadata.run(follower_stop), name="metadata"),
            asyncio.create_task(self.membership.run(follower_stop), name="membership"),
        ]
        await stop.wait()
        log.info("stopping: giving partitions up")
        self._stopping = True
        partitions = list(self._partitions.values())
        self._partitions.clear()
        self._owned = {}
        self.owned_transaction_partitions = {}
        await asyncio.gather(*(p.stop() for p in partitions), return_exceptions=True)
        follower_stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.membership.leave()
        await server.stop(STOP_GRACE_S)
        await self.offsets_log.close()
        await self.channel.close()
        log.info("coordinator stopped")

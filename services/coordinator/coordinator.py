"""The coordinator process's composition: membership, metadata, owned partitions, gRPC.

The coordinator keeps no local state (DESIGN §6): everything lives in `__consumer_offsets`
(groups) and `__transaction_state` (transactions). It registers and heartbeats with the
controllers (coordinator_membership.py), follows the metadata log
(services/runtime/metadata_log.py), and on every new image or epoch works out which partitions of
both topics it owns (ownership.py): new ones are loaded (offsets_partition.py,
transaction_partition.py), lost ones dropped. A partition that fails (its writer was fenced, or a
write was refused) is loaded again from the log while it is still owned, once in touch. A topic
an image deletes (or creates again under its name) takes every group's offsets of it along, in the
partitions loaded or loading here (OffsetsPartition.on_topics_deleted), as Kafka's
onPartitionsDeleted does; a partition loaded after such an image drops the offsets recorded under
a topic id the image no longer shows (OffsetsPartition.on_loaded). It serves
GroupCoordinatorService (servicer.py), TransactionCoordinatorService (transaction_servicer.py)
and, like every service, FindCoordinator from its own image.

It answers only while `in_touch()`: a coordinator cut off from the controllers stops answering
before the controller can have replaced it (writes are fenced on the brokers anyway; this covers
answers from memory, such as a heartbeat that changes nothing). On SIGTERM it gives its
partitions up, asks the controller to fence it (so they move at once), and stops; so it does,
exiting 3, when following the metadata log or heartbeating failed (an image it could not apply):
heartbeats alone would keep its partitions assigned to a process that no longer sees them move.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.coordinators import (
    CONSUMER_OFFSETS_TOPIC,
    COORDINATOR_TOPICS,
    TRANSACTION_STATE_TOPIC,
    group_id_problem,
    group_partition,
    transaction_partition,
    transactional_id_problem,
)
from samsa.metadata.image import CoordinatorAssignment, MetadataImage
from samsa.services.coordinator.coordinator_membership import CoordinatorMembership
from samsa.services.coordinator.coordinator_partition import (
    CoordinatorPartition,
    PartitionUnavailableError,
)
from samsa.services.coordinator.group_model import GroupConfig
from samsa.services.coordinator.offsets_log import OffsetsLog
from samsa.services.coordinator.offsets_partition import OffsetsPartition
from samsa.services.coordinator.ownership import (
    deleted_topics,
    owned_partitions,
    ownership_changes,
    subscribable_topic_ids,
    subscribable_topics,
)
from samsa.services.coordinator.servicer import GroupCoordinatorServicer
from samsa.services.coordinator.transaction_partition import (
    TransactionConfig,
    TransactionPartition,
)
from samsa.services.coordinator.transaction_servicer import TransactionCoordinatorServicer
from samsa.services.runtime.authorization import AuthorizerConfig
from samsa.services.runtime.config import with_bound_port
from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.services.runtime.coordinator_lookup import CoordinatorLookupServicer
from samsa.services.runtime.listeners import Listeners
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.metadata_log import MetadataLogFollower
from samsa.services.runtime.sasl_gate import SASL_OFF, SaslConfig
from samsa.services.runtime.stream_answers import Draining
from samsa.services.runtime.txn_added_check import TransactionMembershipCheck
from samsa.v1 import coordinator_pb2, coordinator_pb2_grpc, transactions_pb2, transactions_pb2_grpc

log = logging.getLogger(__name__)

STOP_GRACE_S = 2.0
RELOAD_DELAY_S = 0.5
# The exit code of a coordinator that stopped because its metadata or membership task failed
# (as a broker's): its supervisor restarts it, and it reads the log afresh.
EXIT_METADATA_FAILED = 3


class Coordinator:
    def __init__(
        self,
        *,
        coordinator_id: int,
        listen: str,
        controllers: list[str],
        member_key: bytes,
        advertised_listener: str | None = None,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        group_config: GroupConfig,
        transaction_config: TransactionConfig | None = None,
        tracing: bool = False,
        health_file: str | None = None,
        connections_max: int = limits.grpc_connections_max,
        internal_listen: str | None = None,
        internal_advertised_listener: str | None = None,
        authorizer: AuthorizerConfig | None = None,
        sasl: SaslConfig = SASL_OFF,
    ) -> None:
        self.coordinator_id = coordinator_id
        # The internal listener (runtime/listeners.py), and what members dial for it.
        self.internal_listen = internal_listen
        self.internal_advertised_listener = internal_advertised_listener or internal_listen
        self.health_file = health_file
        self.connections_max = connections_max
        self.authorizer = authorizer  # None: ACLs off (authorization.py)
        self.sasl = sasl  # SASL/SCRAM and its gate (sasl_gate.py); off by default
        self.member_key = member_key  # checks members' calls when ACLs are on
        self.listen = listen
        # What the coordinator registers: the address others dial (listen may be 0.0.0.0:PORT).
        self.advertised_listener = advertised_listener or listen
        self.tracing = tracing
        self.group_config = group_config
        self.transaction_config = transaction_config or TransactionConfig()
        signer = MemberSigner(member_key, coordinator_id)
        self.channel = ControllerChannel(controllers, signer)
        self.metadata = MetadataLogFollower(self.channel, self._on_image)
        self.membership = CoordinatorMembership(
            coordinator_id=coordinator_id,
            endpoint=self.advertised_listener,
            controllers=self.channel,
            heartbeat_interval_ms=heartbeat_interval_ms,
            session_timeout_ms=session_timeout_ms,
            metadata_offset=lambda: self.metadata.image.end_offset,
            on_epoch_change=lambda: self._reconcile(self.metadata.image),
        )
        self.session_timeout_s = session_timeout_ms / 1000
        self.offsets_log = OffsetsLog(lambda: self.metadata.image, signer)
        self.transaction_check = TransactionMembershipCheck(lambda: self.metadata.image, signer)
        self.topics: dict[str, int] = {}
        self.topic_ids: dict[str, bytes] = {}  # of the same topics: recorded with their offsets
        # What this process owns now (updated on every image and epoch) and what it has
        # loaded or is loading, per coordinator topic, by partition number.
        self._owned: dict[str, dict[int, CoordinatorAssignment]] = {
            topic: {} for topic in COORDINATOR_TOPICS
        }
        self._partitions: dict[str, dict[int, CoordinatorPartition]] = {
            topic: {} for topic in COORDINATOR_TOPICS
        }
        self._stopping = False
        self._dropping: set[asyncio.Task[None]] = set()  # partitions being given up (a strong ref)
        # Set as it stops: its transaction streams then end (services/runtime/stream_answers.py).
        self.draining = Draining()

    # --- what the servicer asks -------------------------------------------------------------

    def partition_for(self, group_id: str) -> OffsetsPartition:
        """The loaded partition holding `group_id`, or PartitionUnavailableError saying why not."""
        if (problem := group_id_problem(group_id)) is not None:
            raise PartitionUnavailableError(ErrorCode.INVALID_GROUP_ID, problem)
        owned = self._loaded(
            CONSUMER_OFFSETS_TOPIC, group_partition, f"group {group_id!r}", group_id
        )
        assert isinstance(owned, OffsetsPartition)
        return owned

    def transaction_partition_for(self, transactional_id: str) -> TransactionPartition:
        """The loaded partition holding `transactional_id`, or PartitionUnavailableError."""
        if (problem := transactional_id_problem(transactional_id)) is not None:
            raise PartitionUnavailableError(ErrorCode.INVALID_REQUEST, problem)
        owned = self._loaded(
            TRANSACTION_STATE_TOPIC,
            transaction_partition,
            f"transactional id {transactional_id!r}",
            transactional_id,
        )
        assert isinstance(owned, TransactionPartition)
        return owned

    def _loaded(
        self, topic_name: str, place: Callable[[str, int], int], what: str, key: str
    ) -> CoordinatorPartition:
        if not self.in_touch():
            raise PartitionUnavailableError(
                ErrorCode.NOT_COORDINATOR,
                f"coordinator {self.coordinator_id} has lost touch with the controllers and "
                "may have been replaced; find the coordinator again and retry",
            )
        topic = self.metadata.image.topics.get(topic_name)
        if topic is None or not topic.partitions:
            raise PartitionUnavailableError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{topic_name} does not exist yet; retry shortly",
            )
        number = place(key, len(topic.partitions))
        owned = self._partitions[topic_name].get(number)
        if owned is None:
            raise PartitionUnavailableError(
                ErrorCode.NOT_COORDINATOR,
                f"{what} lives in partition {number} of {topic_name}, which coordinator "
                f"{self.coordinator_id} does not own; find the coordinator again and retry",
            )
        owned.check_serving()
        return owned

    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before (from a broker's block), or
        PartitionUnavailableError (COORDINATOR_NOT_AVAILABLE, retriable) saying why not."""
        code, message, producer_id = await self.offsets_log.init_producer_id()
        if code or producer_id < 0:
            raise PartitionUnavailableError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"no producer id could be taken for the transactional id: {message}; retry",
            )
        return producer_id

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

    def owned_partitions(self) -> list[OffsetsPartition]:
        """The partitions of `__consumer_offsets` loaded or loading here, by number."""
        owned = self._partitions[CONSUMER_OFFSETS_TOPIC]
        return [owned[p] for p in sorted(owned)]  # type: ignore[misc]

    def owned_transaction_partitions(self) -> list[TransactionPartition]:
        """The partitions of `__transaction_state` loaded or loading here, by number."""
        owned = self._partitions[TRANSACTION_STATE_TOPIC]
        return [owned[p] for p in sorted(owned)]  # type: ignore[misc]

    # --- ownership --------------------------------------------------------------------------

    async def _on_image(self, old: MetadataImage, new: MetadataImage) -> None:
        if old.topics is not new.topics:
            self.topics = subscribable_topics(new)
            self.topic_ids = subscribable_topic_ids(new)
        self._reconcile(new)
        deleted = deleted_topics(old, new)
        if deleted:  # their offsets go, before any commit of a topic created again is taken
            for partition in self.owned_partitions():
                partition.on_topics_deleted(deleted)

    def _reconcile(self, image: MetadataImage) -> None:
        epoch = self.membership.coordinator_epoch
        for topic in COORDINATOR_TOPICS:
            owned: dict[int, CoordinatorAssignment] = {}
            if not self._stopping:
                owned = owned_partitions(image, topic, self.coordinator_id, epoch)
            changes = ownership_changes(self._owned[topic], owned)
            self._owned[topic] = owned
            for number in changes.drop:
                partition = self._partitions[topic].pop(number, None)
                if partition is not None:
                    log.info("partition dropped", extra={"topic": topic, "partition": number})
                    dropping = asyncio.get_running_loop().create_task(partition.stop())
                    self._dropping.add(dropping)
                    dropping.add_done_callback(self._dropping.discard)
            for assignment in changes.load:
                self._load(assignment)

    def _load(self, assignment: CoordinatorAssignment) -> None:
        partition: CoordinatorPartition
        if assignment.topic == TRANSACTION_STATE_TOPIC:
            partition = TransactionPartition(
                assignment,
                coordinator_id=self.coordinator_id,
                offsets_log=self.offsets_log,
                config=self.transaction_config,
                allocate_producer_id=self.allocate_producer_id,
                on_ended=self._on_partition_ended,
            )
        else:
            partition = OffsetsPartition(
                assignment,
                coordinator_id=self.coordinator_id,
                offsets_log=self.offsets_log,
                config=self.group_config,
                on_ended=self._on_partition_ended,
                in_touch=self.in_touch,
                topic_ids=lambda: self.topic_ids,
            )
        self._partitions[assignment.topic][assignment.partition] = partition
        log.info(
            "loading partition",
            extra={
                "topic": assignment.topic,
                "partition": assignment.partition,
                "assignment_epoch": assignment.assignment_epoch,
            },
        )
        partition.start()

    def _on_partition_ended(self, partition: CoordinatorPartition) -> None:
        """A partition failed on its own: load it again from the log if it is still ours."""
        loaded = self._partitions[partition.topic]
        if loaded.get(partition.partition) is not partition:
            return  # dropped on purpose
        del loaded[partition.partition]
        asyncio.get_running_loop().call_later(RELOAD_DELAY_S, self._reload, partition.assignment)

    def _reload(self, assignment: CoordinatorAssignment) -> None:
        """Load a failed partition again if it is still ours, once in touch: out of touch, the
        image saying so may be stale (the partition failed because a new owner fenced it), and
        each load would read the whole partition from its leader only to fail at the fence."""
        topic, number = assignment.topic, assignment.partition
        if self._owned[topic].get(number) != assignment or number in self._partitions[topic]:
            return
        if not self.in_touch():
            asyncio.get_running_loop().call_later(RELOAD_DELAY_S, self._reload, assignment)
            return
        self._load(assignment)

    # --- running ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop`; the exit code (EXIT_METADATA_FAILED: a follow task failed)."""
        services = [
            coordinator_pb2.DESCRIPTOR.services_by_name[name].full_name
            for name in ("GroupCoordinatorService", "CoordinatorLookupService")
        ]
        services.append(
            transactions_pb2.DESCRIPTOR.services_by_name["TransactionCoordinatorService"].full_name
        )
        server = Listeners(
            self.listen,
            services,
            tracing=self.tracing,
            health_file=self.health_file,
            connections_max=self.connections_max,
            internal_listen=self.internal_listen,
            authorization=None
            if self.authorizer is None
            else self.authorizer.authorization(
                self.member_key, acls=lambda: self.metadata.image.acls
            ),
            sasl=self.sasl.bind(self.member_key, lambda: self.metadata.image.scram_credentials),
        )
        coordinator_pb2_grpc.add_GroupCoordinatorServiceServicer_to_server(
            GroupCoordinatorServicer(self), server.handlers
        )
        transactions_pb2_grpc.add_TransactionCoordinatorServiceServicer_to_server(
            TransactionCoordinatorServicer(self), server.handlers
        )
        coordinator_pb2_grpc.add_CoordinatorLookupServiceServicer_to_server(
            CoordinatorLookupServicer(
                image=lambda: self.metadata.image,
                offsets_topic_replication_factor=None,
                transaction_state_log_replication_factor=None,
            ),
            server.handlers,
        )
        await server.start()
        # listeners=HOST:0 (any free port) advertises the port bound, not one nobody can dial.
        self.advertised_listener = with_bound_port(self.advertised_listener, server.port)
        self.membership.endpoint = self.advertised_listener
        if self.internal_advertised_listener is not None and server.internal_port is not None:
            self.internal_advertised_listener = with_bound_port(
                self.internal_advertised_listener, server.internal_port
            )
            self.membership.internal_endpoint = self.internal_advertised_listener
        log.info(
            "coordinator serving",
            extra={
                "coordinator_id": self.coordinator_id,
                "listen": self.listen,
                "advertised_listener": self.advertised_listener,
                "internal_advertised_listener": self.internal_advertised_listener,
            },
        )
        follower_stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self.metadata.run(follower_stop), name="metadata"),
            asyncio.create_task(self.membership.run(follower_stop), name="membership"),
        ]
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        failed = next((t for t in tasks if t.done() and not stop.is_set()), None)
        if failed is not None:  # its image or its epoch stands still: stop rather than answer
            log.critical("stopping: the %s task failed", failed.get_name(), exc_info=_error(failed))
        log.info("stopping: giving partitions up")
        self._stopping = True
        self.draining.set()
        partitions = [p for loaded in self._partitions.values() for p in loaded.values()]
        for topic in COORDINATOR_TOPICS:
            self._partitions[topic] = {}
            self._owned[topic] = {}
        await asyncio.gather(
            *(p.stop() for p in partitions), *self._dropping, return_exceptions=True
        )
        follower_stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.membership.leave()
        await server.stop(STOP_GRACE_S)
        await self.offsets_log.close()
        await self.transaction_check.close()
        await self.channel.close()
        log.info("coordinator stopped")
        return EXIT_METADATA_FAILED if failed is not None else 0


def _error(task: asyncio.Task[None]) -> BaseException | None:
    """What ended `task` (None: it returned, which it should only do once stopped)."""
    return None if task.cancelled() else task.exception()

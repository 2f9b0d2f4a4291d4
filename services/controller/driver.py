"""The controller's driver: the asyncio side of one controller, between gRPC and the Raft quorum.

Theory of operation (DESIGN §2). The quorum (quorum.py) replicates metadata batches and tells
this driver, on the event loop and in order, what was applied, when a snapshot was loaded, and
who leads. The driver keeps:

- the committed image and the recent batches (`MetadataHistory`), which every controller serves
  to FetchMetadata long-polls and Describe* reads, and the snapshots followers beyond those
  batches fetch in chunks (`SnapshotCache`, metadata/snapshot_transfer.py);
- on the active controller only, the write path. Writes are serialized: `write` generates records
  against the committed image with a pure function of the control plane, proposes them as one
  batch, and answers once the batch is applied here — so every decision is taken against exactly
  the state the log holds, and a batch can never be generated against records that will not
  commit. (KRaft pipelines writes against an uncommitted image; metadata writes are rare enough
  here that one in flight at a time is simpler and fast enough: a Raft round trip is ~1 ms.)
- A controller becomes *active* only after its own empty "barrier" entry is applied: that proves
  every entry of earlier terms has been applied, so its image is the whole committed log.
- Broker liveness: the active controller fences brokers whose heartbeats stopped for
  `broker.session.timeout.ms`; a newly active controller gives every broker a fresh session, since
  it never saw their earlier heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pysyncobj.config import FAIL_REASON

from samsa.common import limits
from samsa.metadata.history import MetadataHistory
from samsa.metadata.image import INITIAL_HASH, MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.snapshot_transfer import SnapshotCache
from samsa.services.controller import controller_metrics
from samsa.services.controller.quorum import ApplyOutcome, Leadership, MetadataQuorum
from samsa.services.controller.quorum_status import RaftStatus
from samsa.v1 import metadata_pb2

log = logging.getLogger(__name__)

Response = TypeVar("Response")
ResponseT = TypeVar("ResponseT", covariant=True)

# How long a proposed batch may take to commit before the writer is told to retry.
COMMIT_TIMEOUT_S = 10.0
# How often the active controller checks broker sessions.
LIVENESS_CHECK_INTERVAL_S = 0.25


class NotControllerError(Exception):
    """This controller is not the active one; `active_node_id` is the one that is, if known."""

    def __init__(self, message: str, active_node_id: int | None) -> None:
        super().__init__(message)
        self.active_node_id = active_node_id


class Decision(Protocol[ResponseT]):
    """What a control-plane function decided: records to commit (maybe none) and the answer."""

    @property
    def records(self) -> Sequence[metadata_pb2.MetadataRecord]: ...

    @property
    def response(self) -> ResponseT: ...


@dataclass(frozen=True)
class Written(Generic[Response]):
    """A write's answer and the metadata offset after its records were committed."""

    response: Response
    metadata_offset: int


class ControllerDriver:
    """One controller's committed state, leadership and write path (see the module doc)."""

    def __init__(self, *, node_id: int, raft_address_to_node: Mapping[str, int]) -> None:
        self.node_id = node_id
        self.raft_address_to_node = dict(raft_address_to_node)
        self.image = MetadataImage.empty()
        self.history = MetadataHistory(
            start_offset=0,
            start_hash=INITIAL_HASH,
            max_batches=limits.metadata_history_batches_max,
        )
        # The snapshots followers beyond the history fetch, in chunks (metadata_fetch.py).
        self.snapshots = SnapshotCache()
        self.snapshot_build_lock = asyncio.Lock()  # one snapshot built at a time
        self.quorum: MetadataQuorum | None = None
        self.leadership = Leadership(is_leader=False, leader_address=None, term=0)
        self.active = False
        # The leader's last sample of its replication state (DescribeQuorum); None otherwise.
        self.raft_status: RaftStatus | None = None
        self.fatal: asyncio.Future[str] | None = None
        self._changed = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._activation: asyncio.Task[None] | None = None
        self._leader_hooks: list[Callable[[], None]] = []
        self._records_in_flight = 0  # records of the batch `write` is waiting on (one at a time)
        self._pending: set[asyncio.Future[ApplyOutcome | None]] = set()  # proposals in flight
        # Gauges over the committed image (controller_metrics.py); nothing while metrics are off.
        controller_metrics.register_if_enabled(lambda: (self.image, self.active))

    def attach(self, quorum: MetadataQuorum) -> None:
        self.quorum = quorum
        self.fatal = asyncio.get_running_loop().create_future()

    def on_becoming_active(self, hook: Callable[[], None]) -> None:
        """Run `hook` each time this controller becomes the active one (e.g. reset sessions)."""
        self._leader_hooks.append(hook)

    # --- QuorumListener (called on the loop, in order) --------------------------------------

    def on_batch_applied(
        self, batch: metadata_pb2.MetadataRecordBatch, image: MetadataImage
    ) -> None:
        self.image = image
        self.history.append(batch, image.hash)
        self._notify()

    def on_snapshot_loaded(self, image: MetadataImage) -> None:
        self.image = image
        self.history.reset(image.end_offset, image.hash)
        self._notify()

    def on_leadership(self, leadership: Leadership) -> None:
        was_leader = self.leadership.is_leader
        self.leadership = leadership
        log.info(
            "raft leadership",
            extra={
                "is_leader": leadership.is_leader,
                "leader": leadership.leader_address,
                "term": leadership.term,
            },
        )
        if leadership.is_leader and not was_leader:
            self._activation = asyncio.get_running_loop().create_task(self._activate())
        elif not leadership.is_leader:
            self.active = False
            self.raft_status = None
            if self._activation is not None:
                self._activation.cancel()
                self._activation = None
            # pysyncobj settles a deposed leader's proposals only once their log index is
            # applied (maybe never, cut off from the quorum): its writers learn of the new
            # leader now, not after COMMIT_TIMEOUT_S with the write lock held meanwhile.
            for pending in self._pending:
                if not pending.done():
                    pending.set_result(None)

    def on_raft_status(self, status: RaftStatus) -> None:
        self.raft_status = status if self.leadership.is_leader else None

    def on_fatal(self, message: str) -> None:
        if self.fatal is not None and not self.fatal.done():
            self.fatal.set_result(message)

    # --- leadership ----------------------------------------------------------------------------

    async def _activate(self) -> None:
        """Commit a barrier entry of this term; once applied, the image is the whole log."""
        while self.leadership.is_leader and not self.active:
            outcome = await self._submit(b"")
            if outcome is ApplyOutcome.BARRIER and self.leadership.is_leader:
                self.active = True
                for hook in self._leader_hooks:
                    hook()
                log.info("active controller", extra={"metadata_offset": self.image.end_offset})
                return
            await asyncio.sleep(0.05)

    def _reactivate(self) -> None:
        if self.leadership.is_leader and (self._activation is None or self._activation.done()):
            self._activation = asyncio.get_running_loop().create_task(self._activate())

    @property
    def active_node_id(self) -> int | None:
        """The active controller's node id as this controller sees it, or None."""
        if self.leadership.is_leader:
            return self.node_id
        address = self.leadership.leader_address
        return None if address is None else self.raft_address_to_node.get(address)

    def _not_controller(self) -> NotControllerError:
        active = self.active_node_id
        if active == self.node_id:
            return NotControllerError("this controller was just elected; retry shortly", None)
        return NotControllerError(f"controller {self.node_id} is not the active controller", active)

    # --- writes ------------------------------------------------------------------------------

    async def write(
        self, generate: Callable[[MetadataImage], Decision[Response]]
    ) -> Written[Response]:
        """Generate against the committed image and commit; NotControllerError if not active."""
        async with self._write_lock:
            if not self.active:
                raise self._not_controller()
            generated = generate(self.image)
            if not generated.records:
                return Written(generated.response, self.image.end_offset)
            batch = make_batch(self.image, list(generated.records), int(time.time() * 1000))
            self._records_in_flight = len(generated.records)
            try:
                outcome = await self._submit(batch.SerializeToString())
            finally:
                self._records_in_flight = 0
            if outcome is not ApplyOutcome.APPLIED:
                if outcome is None and self.active:
                    # The batch may still commit later: until a new barrier is applied, the
                    # image may not be the whole log. Still the Raft leader (no leadership
                    # change will come to restart it), so commit that barrier now.
                    self.active = False
                    self._reactivate()
                raise self._not_controller()
            return Written(generated.response, self.image.end_offset)

    async def _submit(self, payload: bytes) -> ApplyOutcome | None:
        """Propose `payload`; its outcome once applied here, None if it failed or timed out."""
        assert self.quorum is not None
        loop = asyncio.get_running_loop()
        done: asyncio.Future[ApplyOutcome | None] = loop.create_future()

        def settle(outcome: ApplyOutcome | None, fail_reason: int) -> None:
            if not done.done():
                done.set_result(outcome if fail_reason == FAIL_REASON.SUCCESS else None)

        self._pending.add(done)
        try:
            self.quorum.submit(payload, settle)
            return await asyncio.wait_for(done, COMMIT_TIMEOUT_S)
        except TimeoutError:
            log.warning("a metadata batch did not commit in time")
            return None
        finally:
            self._pending.discard(done)

    # --- reads -------------------------------------------------------------------------------

    def metadata_offset_bound(self) -> int | None:
        """The highest metadata offset any controller can have committed, or None if unknown.

        Only the active controller knows: its barrier proved its image holds every entry of
        earlier terms, and it is the only writer, with at most one batch in flight. A follower
        cannot bound the leader from its Raft indices: a Raft entry carries a batch of any number
        of records (or none), so no index maps to a metadata offset."""
        if not self.active:
            return None
        return self.image.end_offset + self._records_in_flight

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        """Wait until this controller has applied `offset`; False on timeout."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self.image.end_offset < offset:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            await self.wait_for_change(remaining)
        return True

    async def wait_for_change(self, timeout_s: float) -> None:
        """Return when the image changes, or after `timeout_s`."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

"""Goal: a controller replica whose image ended at another offset than the quorum's log (it
applied a batch of another record count at a place the quorum committed differently, as
pysyncobj does when it truncates an applied entry: DESIGN §2) stops, as it does for a hash that
does not match. It skipped every later batch as stale instead: the next batch started below its
end, each one after it beyond, so none was ever compared with its hash, and it served a frozen
image for good (and, elected, generated batches at an offset no other replica was at).

Method: the replicated state machine alone (`MetadataQuorum.apply` as pysyncobj calls it on a
committed entry, `_doApply`), without Raft threads or ports, fed the quorum's batches after it
applied another one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller.quorum import ApplyOutcome, MetadataQuorum
from samsa.v1 import metadata_pb2 as m


def register(broker_id: int) -> m.MetadataRecord:
    record = m.RegisterBrokerRecord(broker_id=broker_id, incarnation_id="i", endpoint="h:1")
    return m.MetadataRecord(register_broker=record)


def topic(name: str, topic_id: bytes) -> m.MetadataRecord:
    return m.MetadataRecord(topic=m.TopicRecord(name=name, topic_id=topic_id))


class _Listener:
    def __init__(self) -> None:
        self.fatal: list[str] = []

    def on_batch_applied(self, batch: m.MetadataRecordBatch, image: Any) -> None:
        pass

    def on_snapshot_loaded(self, image: Any) -> None:
        pass

    def on_leadership(self, leadership: Any) -> None:
        pass

    def on_fatal(self, message: str) -> None:
        self.fatal.append(message)


def _replica(image: MetadataImage, loop: asyncio.AbstractEventLoop) -> MetadataQuorum:
    replica = object.__new__(MetadataQuorum)  # the state machine only: no SyncObj started
    replica._listener = _Listener()
    replica._loop = loop
    replica._image = image
    replica._poisoned = False
    return replica


def _apply(replica: MetadataQuorum, batch: m.MetadataRecordBatch) -> ApplyOutcome:
    return replica.apply(batch.SerializeToString(), _doApply=True)  # type: ignore[no-any-return]


def test_a_replica_that_applied_another_batch_in_its_place_stops() -> None:
    empty = MetadataImage.empty()
    start = replay(empty, make_batch(empty, [register(1)], 0))
    ours = make_batch(start, [register(2), register(3)], 0)  # applied here, then truncated
    theirs = make_batch(start, [register(4), register(5), register(6)], 0)  # committed instead
    quorum_image = replay(start, theirs)
    after = make_batch(quorum_image, [topic("orders", b"o" * 16)], 0)
    loop = asyncio.new_event_loop()
    try:
        replica = _replica(replay(start, ours), loop)
        assert _apply(replica, theirs) is ApplyOutcome.STALE  # below its end: as a duplicate
        assert _apply(replica, after) is ApplyOutcome.POISONED  # beyond it: a gap
        loop.run_until_complete(asyncio.sleep(0))
        assert "beyond the image's end" in replica._listener.fatal[0]  # type: ignore[attr-defined]
        assert _apply(replica, after) is ApplyOutcome.POISONED  # and it applies nothing more
    finally:
        loop.close()


def test_a_replica_at_the_quorum_end_applies_and_skips_what_it_applied() -> None:
    empty = MetadataImage.empty()
    first = make_batch(empty, [register(1)], 0)
    image = replay(empty, first)
    second = make_batch(image, [register(2)], 0)
    loop = asyncio.new_event_loop()
    try:
        replica = _replica(image, loop)
        assert _apply(replica, first) is ApplyOutcome.STALE
        assert _apply(replica, second) is ApplyOutcome.APPLIED
        assert replica._image.end_offset == 2
    finally:
        loop.close()

"""Goal: a member process whose metadata must come from a snapshot larger than the gRPC message
bound catches up: the controller names the snapshot in its FetchMetadata answer and serves it
in bounded chunks (FetchSnapshot, KIP-630), and the follower loads it once it is whole and
checked. Before, the whole snapshot rode in the FetchMetadata answer, and the server refused to
send it (RESOURCE_EXHAUSTED, "Sent message larger than max"), at every retry, for good
(/tmp/review_metasnap/test_snapshot_over_message_cap.py).

Method: a real grpc.aio server whose send limit is lowered to 64 KiB, serving the real
ControllerServicer over a ControllerDriver whose image (3,000 partitions, ~106 KiB of snapshot)
was set by hand with an empty history, so a follower starting from nothing needs the snapshot;
chunks are bounded at 16 KiB. The real MetadataLogFollower reads it through a stand-in for the
controller channel that calls the server and records each answer's size.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import grpc
import pytest

from samsa.common import limits
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.metadata.snapshot_transfer import ServedSnapshot, SnapshotAssembler, SnapshotCache
from samsa.services.controller import servicer
from samsa.services.controller.driver import ControllerDriver
from samsa.services.controller.metadata_fetch import answer_fetch
from samsa.services.runtime.metadata_log import MetadataLogFollower
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc
from samsa.v1 import metadata_pb2 as m

SEND_BYTES_MAX = 64 * 1024
CHUNK_BYTES = 16 * 1024


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "metadata_snapshot_chunk_bytes", CHUNK_BYTES)


def big_batch(image: MetadataImage) -> m.MetadataRecordBatch:
    records = [
        m.MetadataRecord(
            register_broker=m.RegisterBrokerRecord(
                broker_id=broker_id, incarnation_id="i", endpoint=f"h:{broker_id}"
            )
        )
        for broker_id in (1, 2, 3)
    ]
    for number in range(30):
        topic_id = uuid.UUID(int=number + 1).bytes
        records.append(m.MetadataRecord(topic=m.TopicRecord(name=f"t{number}", topic_id=topic_id)))
        records += [
            m.MetadataRecord(
                partition=m.PartitionRecord(
                    topic_id=topic_id, partition=p, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1
                )
            )
            for p in range(100)
        ]
    return make_batch(image, records, 1000)


def register_batch(image: MetadataImage, broker_id: int) -> m.MetadataRecordBatch:
    record = m.RegisterBrokerRecord(broker_id=broker_id, incarnation_id="i", endpoint="h:9")
    return make_batch(image, [m.MetadataRecord(register_broker=record)], 2000)


class Reads:
    """The controller channel's reads, straight to one server; `before` runs before each."""

    committed_offset_seen = 0

    def __init__(self, stub: controller_pb2_grpc.ControllerServiceStub) -> None:
        self.stub = stub
        self.calls: list[tuple[str, int]] = []  # (method, answer's serialized bytes)
        self.before = lambda method: None

    async def read(self, method: str, request: Any, timeout_s: float) -> Any:
        self.before(method)
        try:
            answer = await getattr(self.stub, method)(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            self.calls.append((f"{method}:{error.code().name}", 0))
            raise
        self.calls.append((method, answer.ByteSize()))
        return answer

    def move_reads(self) -> None:
        pass


async def follow_from_nothing(
    driver: ControllerDriver, reads_hook: Any = None
) -> tuple[list[MetadataImage], list[tuple[str, int]]]:
    """Serve `driver`, and follow it from an empty image until the follower has its image."""
    service = object.__new__(servicer.ControllerServicer)
    service.driver = driver
    service.controller_endpoints = {1: "h:1"}
    service.controller_internal_endpoints = {}
    service.cluster_id = "cluster"
    server = grpc.aio.server(options=[("grpc.max_send_message_length", SEND_BYTES_MAX)])
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    handed: list[MetadataImage] = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            reads = Reads(controller_pb2_grpc.ControllerServiceStub(channel))
            if reads_hook is not None:
                reads.before = lambda method: reads_hook(method, reads)
            stop = asyncio.Event()

            async def on_change(old: MetadataImage, new: MetadataImage) -> None:
                handed.append(new)
                if new.end_offset == driver.image.end_offset:
                    stop.set()

            follower = MetadataLogFollower(reads, on_change)  # type: ignore[arg-type]
            await asyncio.wait_for(follower.run(stop), 20)
    finally:
        await server.stop(None)
    return handed, reads.calls


def controller_at(*batches_of: Any) -> ControllerDriver:
    """A driver that applied the batches, its history then emptied (a follower starting from
    nothing is beyond it, as after a compaction)."""
    driver = ControllerDriver(node_id=1, raft_address_to_node={})
    image = MetadataImage.empty()
    for make in batches_of:
        batch = make(image)
        image = replay(image, batch)
        driver.on_batch_applied(batch, image)
    driver.history.reset(image.end_offset, image.hash)
    return driver


def test_a_follower_catches_up_from_a_snapshot_larger_than_a_message() -> None:
    driver = controller_at(big_batch)
    handed, calls = asyncio.run(follow_from_nothing(driver))
    assert handed == [driver.image], "the whole image, once"
    chunks = [size for method, size in calls if method == "FetchSnapshot"]
    assert sum(chunks) > SEND_BYTES_MAX, "the snapshot is larger than a message"
    assert max(size for _, size in calls) <= CHUNK_BYTES + 1024, "every answer is bounded"


def test_a_snapshot_gone_mid_transfer_is_asked_for_again() -> None:
    # The controller's log moves on and it drops the snapshot the follower is reading (its
    # cache emptied, as a restarted controller's or another controller's is): FetchSnapshot
    # answers NOT_FOUND, and the follower starts over with FetchMetadata and the new snapshot.
    driver = controller_at(big_batch)
    fetched = []

    def hook(method: str, reads: Reads) -> None:
        fetched.append(method)
        if fetched.count("FetchSnapshot") == 2:
            batch = register_batch(driver.image, 7)
            image = replay(driver.image, batch)
            driver.on_batch_applied(batch, image)
            driver.history.reset(image.end_offset, image.hash)
            driver.snapshots = SnapshotCache()

    handed, calls = asyncio.run(follow_from_nothing(driver, hook))
    assert handed == [driver.image] and 7 in driver.image.brokers
    assert ("FetchSnapshot:NOT_FOUND", 0) in calls
    assert [method for method, _ in calls].count("FetchMetadata") == 2


def test_a_snapshot_is_built_off_the_loop_once_for_followers_asking_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Building one took ~0.4 s at 100,000 partitions: on the loop it stalled every heartbeat and
    # long-poll of the controller, and two followers asking at once built it twice.
    driver = controller_at(big_batch)
    builders: list[int] = []
    build = ServedSnapshot.of

    def recorded(image: MetadataImage) -> ServedSnapshot:
        builders.append(threading.get_ident())
        return build(image)

    monkeypatch.setattr(ServedSnapshot, "of", staticmethod(recorded))
    request = c.FetchMetadataRequest(end_offset=0, max_wait_ms=0)

    async def two_followers() -> list[Any]:
        return list(await asyncio.gather(*(answer_fetch(driver, request) for _ in range(2))))

    answers = asyncio.run(two_followers())
    assert answers[0] == answers[1] and isinstance(answers[0], c.SnapshotId)
    assert answers[0].end_offset == driver.image.end_offset
    assert len(builders) == 1, "built once, for both"
    assert builders[0] != threading.get_ident(), "built on a worker thread, not the loop's"


def test_the_follower_loads_a_snapshot_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # Parsing and replaying one took ~1 s at 100,000 partitions, which on the loop of a broker
    # or coordinator stalled its heartbeats and requests.
    driver = controller_at(big_batch)
    loaders: list[int] = []
    load = SnapshotAssembler.image

    def recorded(assembler: SnapshotAssembler) -> MetadataImage:
        loaders.append(threading.get_ident())
        return load(assembler)

    monkeypatch.setattr(SnapshotAssembler, "image", recorded)
    handed, _ = asyncio.run(follow_from_nothing(driver))
    assert handed == [driver.image]
    assert len(loaders) == 1 and loaders[0] != threading.get_ident()

"""Goal: the ISR manager proposes the changes it decided in as few AlterPartition requests as the
limit allows, keeps one request in flight, and settles each partition by its own result: an
accepted one waits for its new partition epoch, a refused one (or every one of a failed
request) goes on the retry backoff, which a partition the host no longer holds loses.

Method: `alter_partition_requests` directly; `_propose` and `_Proposals` with a stand-in host
(only `broker_id` and `partitions`) and a stand-in controller channel that answers canned
responses, or holds the request until the test releases it.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.services.broker.broker_metrics import NO_METRICS
from samsa.services.broker.replica import isr_manager
from samsa.services.broker.replica.isr_manager import Proposal, alter_partition_requests
from samsa.services.broker.replica.partition_replica import PartitionReplica
from samsa.services.runtime.controller_channel import ControllerUnavailableError
from samsa.v1 import controller_pb2 as c


def proposals(count: int) -> list[Proposal]:
    return [Proposal("t", p, leader_epoch=3, partition_epoch=p, isr=(1, 2)) for p in range(count)]


def test_proposals_are_chunked_by_the_limit_in_order():
    requests = alter_partition_requests(7, 42, proposals(5), items_max=2)
    assert [len(r.partitions) for r in requests] == [2, 2, 1]
    assert {(r.broker_id, r.broker_epoch) for r in requests} == {(7, 42)}
    sent = [item for r in requests for item in r.partitions]
    assert [item.partition for item in sent] == [0, 1, 2, 3, 4]
    assert (sent[3].leader_epoch, sent[3].partition_epoch, list(sent[3].new_isr)) == (3, 3, [1, 2])
    assert alter_partition_requests(7, 42, []) == []


def test_the_default_chunk_is_the_controllers_limit():
    requests = alter_partition_requests(1, 1, proposals(limits.alter_partition_items_max + 1))
    assert [len(r.partitions) for r in requests] == [limits.alter_partition_items_max, 1]


class Channel:
    """Answers AlterPartition with `answer(request)`, after `release` is set."""

    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        self.answer = answer
        self.release = asyncio.Event()
        self.release.set()
        self.sent: list[c.AlterPartitionRequest] = []

    async def write(self, method: str, request: c.AlterPartitionRequest):  # type: ignore[no-untyped-def]
        assert method == "AlterPartition"
        self.sent.append(request)
        await self.release.wait()
        return self.answer(request)


def accept_even(request: c.AlterPartitionRequest) -> c.AlterPartitionResponse:
    """Accept even partitions (partition epoch + 1), refuse odd ones."""
    response = c.AlterPartitionResponse()
    for item in request.partitions:
        result = response.partitions.add(topic=item.topic, partition=item.partition)
        if item.partition % 2 == 0:
            result.partition_epoch = item.partition_epoch + 1
        else:
            result.error_code = ErrorCode.INVALID_UPDATE_VERSION  # type: ignore[assignment]
    return response


def host(count: int) -> SimpleNamespace:
    """Partitions ("t", p) whose replica has `proposals(count)`'s proposal in flight."""
    replicas = {("t", p): PartitionReplica(1) for p in range(count)}
    for (_, p), replica in replicas.items():
        replica.proposal_sent((1, 2), partition_epoch=p)
    return SimpleNamespace(
        broker_id=1,
        metrics=NO_METRICS,
        partitions={key: SimpleNamespace(replica=replica) for key, replica in replicas.items()},
    )


def test_each_partition_is_settled_by_its_own_result():
    stand_in = host(4)
    (request,) = alter_partition_requests(1, 9, proposals(4))
    accepted, refused = asyncio.run(
        isr_manager._propose(stand_in, Channel(accept_even), request)  # type: ignore[arg-type]
    )
    assert (accepted, refused) == ([("t", 0), ("t", 2)], [("t", 1), ("t", 3)])
    awaited = {key: h.replica.awaited_partition_epoch for key, h in stand_in.partitions.items()}
    assert awaited == {("t", 0): 1, ("t", 1): -1, ("t", 2): 3, ("t", 3): -1}


def test_a_failed_request_refuses_every_partition_it_carried():
    def unavailable(request):  # type: ignore[no-untyped-def]
        raise ControllerUnavailableError("no controller")

    (request,) = alter_partition_requests(1, 9, proposals(3))
    accepted, refused = asyncio.run(
        isr_manager._propose(host(3), Channel(unavailable), request)  # type: ignore[arg-type]
    )
    assert accepted == [] and refused == [("t", 0), ("t", 1), ("t", 2)]


def test_one_request_in_flight_and_refused_partitions_back_off():
    count = limits.alter_partition_items_max + 1  # two chunks

    async def run() -> None:
        channel = Channel(accept_even)
        channel.release.clear()
        manager = isr_manager._Proposals(host(count), channel, lambda: 9)  # type: ignore[arg-type]
        manager.start(proposals(count))
        await asyncio.sleep(0)
        assert manager.busy and len(channel.sent) == 1, "chunks go one at a time"
        with pytest.raises(AssertionError):
            manager.start(proposals(1))
        channel.release.set()
        while manager.busy:
            await asyncio.sleep(0)
        assert [len(r.partitions) for r in channel.sent] == [count - 1, 1]
        odd = {("t", p) for p in range(1, count, 2)}
        assert set(manager._retry_at) == odd, "only the refused ones retry"

    asyncio.run(run())


def test_a_partition_gone_loses_its_backoff():
    """A refused partition backs off longer at each refusal. Once the host no longer holds it
    (its topic deleted), its entries go: a topic created again under the name is a new
    partition, which would otherwise inherit the old one's backoff and retry time."""
    stand_in = host(2)
    manager = isr_manager._Proposals(stand_in, Channel(accept_even), lambda: 9)  # type: ignore[arg-type]
    manager._retry_later([("t", 0), ("t", 1)])
    manager._retry_later([("t", 0), ("t", 1)])
    doubled = 2 * isr_manager.RETRY_BACKOFF_S
    assert manager._backoff_s == {("t", 0): doubled, ("t", 1): doubled}
    del stand_in.partitions[("t", 0)]  # deleted
    stand_in.partitions[("t", 1)] = SimpleNamespace(replica=PartitionReplica(1))  # and again
    assert manager.due_retries() == []
    assert manager._backoff_s == {} and manager._retry_at == {}
    manager._retry_later([("t", 1)])
    assert manager._backoff_s == {("t", 1): isr_manager.RETRY_BACKOFF_S}, "starts over"
    manager._retry_later([("t", 0)])  # an answer for the deleted one arriving late
    assert ("t", 0) not in manager._backoff_s and ("t", 0) not in manager._retry_at

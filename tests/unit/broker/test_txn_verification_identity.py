"""Goal: KIP-890's verification covers every transactional batch of a partition, not only the
first: a Produce whose records for one partition carry transactional batches of more than one
(producer id, epoch) is refused whole, so that a batch riding behind a verified one can never open
a transaction no coordinator knows of (a hanging transaction, which holds the last stable offset
and every read_committed reader for ever). A transactional batch whose producer id or epoch is
negative is refused as such (INVALID_RECORD), not as one of several producers.

Method: a PartitionHost over a real log (one replica). Producer 7 has a transaction open at
epoch 0, so its next batch is verified without asking a coordinator (the shortcut); the request
carries that batch followed by producer 8's transactional batch (or producer 7's at a newer
epoch). The verifier's coordinator check is replaced by one that fails the test if asked. The
verdict goes through `produce` as the servicer passes it; the log must hold nothing new.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.record.codec import build_batch
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.produce import produce
from samsa.services.broker.requests.txn_verification import (
    MIXED,
    TransactionVerifier,
    transactional_partitions,
)
from samsa.v1 import broker_pb2 as b

TOPIC_ID = b"\x0b" * 16


@pytest.fixture
def host(tmp_path: Path) -> Iterator[PartitionHost]:
    with hosting(tmp_path, single_broker_image({"t": (TOPIC_ID, led_partitions(1))})) as hosted:
        yield hosted


class NoCoordinator:
    async def ask(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("the coordinator was asked")


def txn_batch(producer_id: int, epoch: int, sequence: int) -> bytes:
    return build_batch(
        [b"v"],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=True,
    )


def request_of(records: bytes) -> b.ProduceRequest:
    return b.ProduceRequest(
        acks=1,
        transactional_id="tx",
        topics=[
            b.ProduceRequest.TopicData(
                name="t", partitions=[b.ProduceRequest.PartitionData(partition=0, records=records)]
            )
        ],
    )


def open_transaction_of_producer_7(host: PartitionHost) -> None:
    hosted = host.get("t", 0)
    assert hosted is not None
    hosted.log.append_as_leader(
        txn_batch(7, 0, 0), leader_epoch=hosted.leader_epoch, now_ms=5, allow_transactional=True
    )
    hosted.advance_high_watermark()


@pytest.mark.parametrize("riding", [txn_batch(8, 0, 0), txn_batch(7, 1, 0)], ids=["other", "newer"])
def test_a_batch_riding_behind_a_verified_one_is_refused(host: PartitionHost, riding) -> None:
    open_transaction_of_producer_7(host)
    hosted = host.get("t", 0)
    assert hosted is not None
    end_before = hosted.log.log_end_offset
    request = request_of(txn_batch(7, 0, 1) + riding)
    verifier = TransactionVerifier(lambda: host.image)
    verifier.check = NoCoordinator()  # type: ignore[assignment]
    transactional = asyncio.run(verifier.verify(host, request))
    response, _ = produce(host, request, 10, transactional=transactional)
    result = response.topics[0].partitions[0]
    assert result.error_code == ErrorCode.INVALID_REQUEST, result
    assert "one transactional producer" in result.error_message
    assert hosted.log.log_end_offset == end_before
    assert [entry.producer_id for entry in hosted.log.producer_entries()] == [7]
    assert hosted.log.last_stable_offset(hosted.high_watermark) == 0  # 7's, nobody else's


def test_batches_of_one_producer_and_epoch_keep_their_identity() -> None:
    request = request_of(txn_batch(7, 0, 1) + txn_batch(7, 0, 2))
    assert transactional_partitions(request) == {("t", 0): (7, 0)}


@pytest.mark.parametrize("identity", [(-1, -1), (-1, 0), (7, -1)])
def test_a_transactional_batch_without_a_producer_is_refused_for_that(
    host: PartitionHost, identity: tuple[int, int]
) -> None:
    # (-1, -1) was the MIXED sentinel: such a batch was refused as carrying "more than one
    # producer id and epoch"; (-1, 0) was sent to the coordinator as producer -1.
    hosted = host.get("t", 0)
    assert hosted is not None
    request = request_of(txn_batch(*identity, sequence=-1 if identity[0] < 0 else 0))
    assert transactional_partitions(request) == {("t", 0): identity}
    verifier = TransactionVerifier(lambda: host.image)
    verifier.check = NoCoordinator()  # type: ignore[assignment]
    transactional = asyncio.run(verifier.verify(host, request))
    response, _ = produce(host, request, 10, transactional=transactional)
    result = response.topics[0].partitions[0]
    assert result.error_code == ErrorCode.INVALID_RECORD, result
    assert f"producer id {identity[0]} and epoch {identity[1]}" in result.error_message
    assert "more than one" not in result.error_message
    assert hosted.log.log_end_offset == 0


def test_a_batch_without_a_producer_beside_another_is_mixed() -> None:
    request = request_of(txn_batch(7, 0, 0) + txn_batch(-1, -1, -1))
    assert transactional_partitions(request) == {("t", 0): MIXED}

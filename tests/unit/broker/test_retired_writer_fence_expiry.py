"""Goal: the fence of a coordinator partition's retired writer id outlives
`producer.id.expiration.ms`. When a partition of `__consumer_offsets` or `__transaction_state`
gets a new producer id (its assignment epochs ran out), its new owner writes the retired id once
at PRODUCER_EPOCH_MAX, and nobody writes with that id again. Before, the brokers' maintenance
pass forgot that entry like any silent producer's, after which a replaced owner that slept past
the expiration and reloaded (its sequence back at 0 once compaction had taken its batches) was
accepted as a new producer: a zombie's writes in the log beside the new owner's.

Method: a real PartitionHost leading one partition of a real log in tmp_path, and the broker's
own maintenance pass (`retention_pass`) run far past the expiration. On an ordinary topic the
same entry still expires, as Kafka's do (an exhausted transactional id must not live for ever).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_host import hosting, two_broker_image

from samsa.common.errors import ErrorCode, SamsaError
from samsa.common.limits import producer_epoch_max
from samsa.common.record.codec import build_batch
from samsa.metadata.coordinators import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from samsa.services.broker.maintenance import retention_pass

TOPIC_ID = b"\x0b" * 16
RETIRED = 100


def writer_batch(epoch: int) -> bytes:
    return build_batch(
        [b"v"],
        keys=[b"k"],
        timestamps=5,
        producer_id=RETIRED,
        producer_epoch=epoch,
        base_sequence=0,
    )


@pytest.mark.parametrize("topic", [CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC])
def test_the_retired_fence_on_a_coordinator_topic_never_expires(tmp_path: Path, topic: str) -> None:
    with hosting(tmp_path, two_broker_image(TOPIC_ID, 1, topic=topic)) as host:
        hosted = host.get(topic, 0)
        assert hosted is not None
        hosted.log.append_as_leader(writer_batch(producer_epoch_max), leader_epoch=0, now_ms=5)
        retention_pass(host, now_ms=1 << 40, producer_id_expiration_ms=1_000)
        assert [entry.producer_id for entry in hosted.log.producer_entries()] == [RETIRED]
        with pytest.raises(SamsaError) as refused:
            hosted.log.append_as_leader(
                writer_batch(producer_epoch_max - 1), leader_epoch=0, now_ms=6
            )
        assert refused.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_an_exhausted_producer_on_an_ordinary_topic_still_expires(tmp_path: Path) -> None:
    with hosting(tmp_path, two_broker_image(TOPIC_ID, 1)) as host:
        hosted = host.get("t", 0)
        assert hosted is not None
        hosted.log.append_as_leader(writer_batch(producer_epoch_max), leader_epoch=0, now_ms=5)
        retention_pass(host, now_ms=1 << 40, producer_id_expiration_ms=1_000)
        assert hosted.log.producer_entries() == []

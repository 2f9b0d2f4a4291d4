"""Goal: the broker's log cleaner compacts its compacted partitions with the pass's reading and
writing on a worker thread, leaves the others alone, and a cancelled pass (the broker stopping)
changes nothing and leaves no file behind, and a partition deleted while a pass runs on another
is passed over rather than ending the task.

Method: a PartitionHost over real logs in a temp dir, one compacted and one plain topic written
by the broker's own produce; the cleaner task run for real on an event loop.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from broker_host import hosting, led_partitions, single_broker_image

from samsa.common.record.codec import build_batch
from samsa.metadata.image import TOPIC_RESOURCE
from samsa.services.broker.log.cleaner import Cleaned, CleaningJob
from samsa.services.broker.log_cleaner import clean_partition, run_log_cleaner
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.requests.produce import produce
from samsa.v1 import broker_pb2 as b

SMALL = {"segment.bytes": "1024", "max.message.bytes": "1024"}


def two_topics():  # type: ignore[no-untyped-def]
    image = single_broker_image(
        {"compacted": (b"\x01" * 16, led_partitions(1)), "plain": (b"\x02" * 16, led_partitions(1))}
    )
    return replace(
        image,
        configs={
            (TOPIC_RESOURCE, "compacted"): SMALL | {"cleanup.policy": "compact"},
            (TOPIC_RESOURCE, "plain"): SMALL,
        },
    )


def write(host: PartitionHost, topic: str, count: int, partition: int = 0) -> None:
    """`count` records over 3 keys, one batch each."""
    for n in range(count):
        records = build_batch([b"v%d" % n + b"." * 300], keys=[b"k%d" % (n % 3)])
        data = b.ProduceRequest.PartitionData(partition=partition, records=records)
        request = b.ProduceRequest(
            acks=1, topics=[b.ProduceRequest.TopicData(name=topic, partitions=[data])]
        )
        produce(host, request, 5)


def leftovers(host: PartitionHost) -> list[str]:
    return sorted(p.name for p in host.data_dir.rglob("*.cleaned"))


def test_the_cleaner_compacts_compacted_partitions_only(tmp_path: Path) -> None:
    with hosting(tmp_path, two_topics()) as host:
        write(host, "compacted", 30)
        write(host, "plain", 30)
        compacted, plain = host.get("compacted", 0).log, host.get("plain", 0).log
        sizes = compacted.size_bytes(), plain.size_bytes()

        async def one_pass() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(run_log_cleaner(host, stop, interval_s=0.01))
            while compacted.size_bytes() == sizes[0]:
                await asyncio.sleep(0.01)
            stop.set()
            await task

        asyncio.run(asyncio.wait_for(one_pass(), 30))
        assert compacted.size_bytes() < sizes[0] and plain.size_bytes() == sizes[1]
        assert leftovers(host) == []


def test_a_cancelled_pass_changes_nothing(tmp_path: Path) -> None:
    with hosting(tmp_path, two_topics()) as host:
        write(host, "compacted", 30)
        hosted = host.get("compacted", 0)
        size = hosted.log.size_bytes()
        cancel = threading.Event()
        cancel.set()  # the broker is stopping

        async def cancelled() -> object:
            never: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            return await clean_partition(hosted, never, cancel)

        assert asyncio.run(cancelled()) is None
        assert hosted.log.size_bytes() == size and leftovers(host) == []


def test_a_partition_deleted_during_another_ones_pass_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk's list is taken before a pass awaits its worker; a topic deleted meanwhile left
    closed logs in it, and compaction_due on one raised AssertionError('the log is closed'),
    which ended the cleaner task for good (nothing was compacted on that broker again)."""
    image = replace(
        single_broker_image({"compacted": (b"\x01" * 16, led_partitions(2))}),
        configs={(TOPIC_RESOURCE, "compacted"): SMALL | {"cleanup.policy": "compact"}},
    )
    with hosting(tmp_path, image) as host:
        write(host, "compacted", 30, partition=0)
        write(host, "compacted", 30, partition=1)
        started, release = threading.Event(), threading.Event()
        real_run = CleaningJob.run

        def held_run(job: CleaningJob, cancel: threading.Event | None = None) -> Cleaned:
            started.set()
            release.wait(5)
            return real_run(job, cancel)

        monkeypatch.setattr(CleaningJob, "run", held_run)

        async def delete_during_a_pass() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(run_log_cleaner(host, stop, interval_s=0.01))
            while not started.is_set():
                await asyncio.sleep(0.005)
            gone = replace(image, topics={}, topic_names={})
            host.apply(gone, partition_changes(image, gone, 1), now_ms=0)
            release.set()
            await asyncio.sleep(0.2)  # several intervals: the walk went on past partition 1
            assert not task.done()
            stop.set()
            await task

        asyncio.run(asyncio.wait_for(delete_during_a_pass(), 30))
        assert host.partitions == {} and leftovers(host) == []

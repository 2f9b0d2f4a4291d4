"""Goal: the scrub loop finds a byte flipped in a closed segment under a running broker, reports
the replica to the controller, keeps its log while the controller refuses (it is the only
in-sync copy, logged at ERROR once) and asks again; once the metadata takes it out of the ISR
it truncates to the bad batch. Its cursor survives a restart.

Method: the real Scrubber task over a PartitionHost with a real log in tmp_path (helpers of
test_corrupt_replica_repair), a fake controller channel that records the requests and answers
what the test says, and short retry intervals (monkeypatched) so the loop runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from test_corrupt_replica_repair import ME, corrupt_replica, image, step

from samsa.common.errors import ErrorCode
from samsa.services.broker import scrubber as scrubber_module
from samsa.services.broker.log.scrub import decode_cursor, encode_cursor
from samsa.services.broker.scrubber import CURSOR_FILE, Scrubber
from samsa.v1 import controller_pb2


class FakeChannel:
    """Answers ReportCorruptReplica with `code`; remembers what it was asked."""

    def __init__(self) -> None:
        self.code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        self.requests: list[controller_pb2.ReportCorruptReplicaRequest] = []

    async def write(self, method: str, request):  # the ControllerChannel.write signature
        assert method == "ReportCorruptReplica"
        self.requests.append(request)
        return controller_pb2.ReportCorruptReplicaResponse(error_code=self.code)


async def until(what: str, probe, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_the_cursor_round_trips_and_garbage_reads_as_none():
    assert decode_cursor(encode_cursor(("my.topic-1", 3, 4096))) == ("my.topic-1", 3, 4096)
    for garbage in (None, b"", b"t 1", b"t x 3", b"t -1 0", b"\xff 1 2"):
        assert decode_cursor(garbage) is None


def test_a_refused_report_keeps_the_log_and_retries_then_the_repair_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(scrubber_module, "REPORT_RETRY_S", 0.02)
    monkeypatch.setattr(scrubber_module, "IDLE_S", 0.01)
    monkeypatch.setattr(scrubber_module, "IDLE_MIN_S", 0.01)
    monkeypatch.setattr(scrubber_module, "REPAIR_CHECK_S", 0.01)
    monkeypatch.setattr(scrubber_module, "CURSOR_CHECKPOINT_INTERVAL_S", 0.0)
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=ME)
    hosted.corrupt = None  # the scrubber has to find it
    end = hosted.log.log_end_offset
    channel = FakeChannel()

    async def scenario() -> None:
        stop = asyncio.Event()
        scrubber = Scrubber(host, channel, lambda: 7, bytes_per_second=1 << 30, interval_ms=60_000)  # type: ignore[arg-type]
        task = asyncio.create_task(scrubber.run(stop))
        await until("three refused reports", lambda: len(channel.requests) >= 3)
        assert hosted.corrupt_from == bad_offset and hosted.log.log_end_offset == end
        request = channel.requests[0]
        assert (request.broker_id, request.broker_epoch, request.topic) == (ME, 7, "t")
        assert request.first_corrupt_offset == bad_offset
        channel.code = ErrorCode.NONE
        step(host, image(2, (2, 3), 1, 2))  # the controller accepted: handed over, out of ISR
        assert hosted.log.log_end_offset == bad_offset and hosted.corrupt_from is None
        asked = len(channel.requests)
        await asyncio.sleep(0.1)
        assert len(channel.requests) == asked, "no report once out of the ISR"
        stop.set()
        await task
        assert scrubber.segments_checked >= 2

    with caplog.at_level(logging.ERROR, logger="samsa.services.broker.scrubber"):
        asyncio.run(scenario())
    refusals = [r for r in caplog.records if "only in-sync or eligible copy" in r.getMessage()]
    found = [r for r in caplog.records if "corrupt batch at rest" in r.getMessage()]
    assert len(refusals) == 1 and len(found) == 1
    assert decode_cursor((tmp_path / CURSOR_FILE).read_bytes()) is not None
    host.close_all()


def test_a_restarted_scrubber_resumes_after_its_checkpointed_cursor(tmp_path: Path) -> None:
    host, hosted, _ = corrupt_replica(tmp_path, leader=ME)
    segments = hosted.log.closed_segments()
    (tmp_path / CURSOR_FILE).write_bytes(encode_cursor(("t", 0, segments[1][0])))
    scrubber = Scrubber(host, FakeChannel(), lambda: 7, bytes_per_second=1, interval_ms=0)  # type: ignore[arg-type]
    assert scrubber.cursor == ("t", 0, segments[1][0])
    host.close_all()


def test_a_short_pass_interval_also_shortens_the_wait_for_segments_to_appear(
    tmp_path: Path,
) -> None:
    """A broker starts its scrubber before its partitions are loaded: the first listing is empty.
    With log.scrub.interval.ms below IDLE_S the next listing comes within that interval (never
    below IDLE_MIN_S), not IDLE_S later."""
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=ME)
    hosted.corrupt = None  # the scrubber has to find it
    loading = dict(host.partitions)
    host.partitions.clear()  # not loaded yet
    assert (
        Scrubber(host, FakeChannel(), lambda: 7, bytes_per_second=1, interval_ms=3_600_000).idle_s
        == scrubber_module.IDLE_S
    )  # type: ignore[arg-type]
    assert (
        Scrubber(host, FakeChannel(), lambda: 7, bytes_per_second=1, interval_ms=0).idle_s
        == scrubber_module.IDLE_MIN_S
    )  # type: ignore[arg-type]

    async def scenario() -> None:
        stop = asyncio.Event()
        scrubber = Scrubber(
            host, FakeChannel(), lambda: 7, bytes_per_second=1 << 30, interval_ms=500
        )  # type: ignore[arg-type]
        assert scrubber.idle_s == 0.5
        task = asyncio.create_task(scrubber.run(stop))
        await until("the first, empty listing", lambda: scrubber._listed_s > float("-inf"))
        host.partitions.update(loading)  # loaded
        await until("the bad batch found", lambda: hosted.corrupt_from == bad_offset, 3.0)
        stop.set()
        await task

    asyncio.run(scenario())
    host.close_all()


def test_a_corrupt_eligible_replica_reports_itself_and_truncates_once_out_of_the_elr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of the ISR but eligible to lead (KIP-966), the replica keeps its log and reports
    itself; once the controller takes it out of the ELR it truncates."""
    monkeypatch.setattr(scrubber_module, "REPAIR_CHECK_S", 0.01)
    host, hosted, bad_offset = corrupt_replica(tmp_path, leader=2)
    hosted = step(host, image(2, (2,), 0, 1, elr=(1, 3)))
    end = hosted.log.log_end_offset
    channel = FakeChannel()
    channel.code = ErrorCode.NONE

    async def scenario() -> None:
        stop = asyncio.Event()
        scrubber = Scrubber(host, channel, lambda: 7, bytes_per_second=1 << 30, interval_ms=60_000)  # type: ignore[arg-type]
        task = asyncio.create_task(scrubber.run(stop))
        await until("the report", lambda: len(channel.requests) >= 1)
        assert channel.requests[0].first_corrupt_offset == bad_offset
        assert hosted.log.log_end_offset == end, "still eligible: nothing cut yet"
        step(host, image(2, (2,), 0, 2, elr=(3,)))  # the controller committed the report
        assert hosted.log.log_end_offset == bad_offset and hosted.corrupt_from is None
        stop.set()
        await task

    asyncio.run(scenario())
    host.close_all()

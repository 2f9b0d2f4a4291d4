"""The scrubber: re-check closed segments at rest, and start the repair of a corrupt replica.

Theory of operation. Reads return stored batches as bytes without re-checking them (DESIGN §3),
so a byte that rots in a closed segment (after a clean stop, or under a running broker) would be
served to every consumer and fail their CRC. This task walks every closed segment of every
partition this broker hosts in (topic, partition, base offset) order (`scrub.next_target`). The
cursor moves after each segment, a new pass starts at most once per `interval_ms`, and the
cursor is checkpointed to `<data-dir>/scrub-cursor` every `CURSOR_CHECKPOINT_INTERVAL_S`, so a
restarted broker resumes its pass. Each segment is read `SCRUB_CHUNK_BYTES` at a time through
the segment's own file descriptor, at no more than `bytes_per_second` (`ScrubBudget`), and fed to
the recovery scan (`SegmentScan`: framing + CRC-32C), yielding to the event loop between chunks.
The reads are positioned preads of one chunk (64 KiB: 0.05-3 ms with its checks, see scrub.py),
so they stay on the loop, where a Log's methods must run (a batch larger than a chunk is read
whole, as the scan needs it).

A segment found bad is scanned a second time, unbudgeted (the file may have changed under the
first scan), and when both agree the partition is marked corrupt from the base offset of the
first bad batch (`PartitionHost.mark_corrupt`, remembering the segment and byte position, so the
truncation later cuts there without re-reading the segment). While this replica is in the ISR
or among the eligible leader replicas (KIP-966) it reports itself with ReportCorruptReplica
(through ControllerChannel.write, signed like every member call): the controller takes it out
of them and, if it led, elects a live ISR member. Only once the metadata shows that does
`PartitionHost.repair_corrupt` truncate the log, and the fetcher re-fetches. A refusal
(ELIGIBLE_LEADERS_NOT_AVAILABLE: no other live in-sync replica, or, for an eligible replica,
no other in-sync or eligible one) is logged at ERROR once per partition; the replica keeps
serving its log, the best copy there is, and asks again every `REPORT_RETRY_S`.

Opening a log finds corruption at rest too: a durable segment whose index files fail their check
is re-read, and a bad batch found then is kept (loading.py), not cut; PartitionHost marks the
replica corrupt with it as it opens the partition, and this loop reports and repairs it alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import grpc

from samsa.common.errors import ErrorCode
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.log.checkpoint_file import read_if_exists, write_atomically
from samsa.services.broker.log.recovery import SegmentScan
from samsa.services.broker.log.scrub import (
    SCRUB_CHUNK_BYTES,
    SCRUB_INDEX_INTERVAL_BYTES,
    ScrubBudget,
    ScrubTarget,
    ScrubVerdict,
    decode_cursor,
    encode_cursor,
    next_target,
    read_size,
)
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.runtime.controller_channel import ControllerChannel, ControllerUnavailableError
from samsa.v1 import controller_pb2

log = logging.getLogger(__name__)

# A modest default: a 1 TiB broker is re-checked about every three days, and the reads (mostly
# from disk, not the page cache) stay far below what a disk serves producers and consumers.
SCRUB_BYTES_PER_SECOND_DEFAULT = 4 * 1024 * 1024
# The shortest time between the starts of two passes over the same data: a small broker does
# not re-read its segments in a loop; a flipped bit is found within a pass plus this.
SCRUB_INTERVAL_MS_DEFAULT = 60 * 60 * 1000
# How often a corrupt replica still in the ISR asks the controller again.
REPORT_RETRY_S = 2.0
# How often the corrupt replicas are looked at (to report, or to truncate once out of the ISR);
# the ISR manager's pace.
REPAIR_CHECK_S = 0.25
# How long the loop sleeps when there is nothing to scrub, and how often it then lists the
# closed segments again (a walk over every hosted partition); the pass interval when that is
# shorter (`idle_s`), never less than IDLE_MIN_S.
IDLE_S = 10.0
IDLE_MIN_S = 0.25
# The cursor file in the data directory, and how often it is rewritten (an fsynced rename: a
# restart re-reads at most this much scrubbing, at the configured rate).
CURSOR_FILE = "scrub-cursor"
CURSOR_CHECKPOINT_INTERVAL_S = 10.0


class Scrubber:
    """The scrub loop of one broker (see the module doc)."""

    def __init__(
        self,
        host: PartitionHost,
        channel: ControllerChannel,
        broker_epoch: Callable[[], int],
        *,
        bytes_per_second: int,
        interval_ms: int,
    ) -> None:
        assert bytes_per_second > 0 and interval_ms >= 0
        self.host = host
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.interval_ms = interval_ms
        self.idle_s = max(IDLE_MIN_S, min(IDLE_S, interval_ms / 1000))
        self.budget = ScrubBudget(bytes_per_second, SCRUB_CHUNK_BYTES, _now_ms())
        self.cursor_path = host.data_dir / CURSOR_FILE
        self.cursor = decode_cursor(read_if_exists(self.cursor_path))
        self._cursor_checkpointed_s = time.monotonic()
        self.pass_started_ms = _now_ms()
        self.segments_checked = 0
        self.bytes_checked = 0
        # Partitions whose report is in flight or was refused, with when to ask again.
        self._next_report_s: dict[tuple[str, int], float] = {}
        self._refusal_logged: set[tuple[str, int]] = set()
        self._listed: list[ScrubTarget] = []  # see _targets
        self._listed_s = float("-inf")

    async def run(self, stop: asyncio.Event) -> None:
        """Scrub, and report and repair corrupt replicas, until `stop` is set."""
        await asyncio.gather(self._scrub_loop(stop), self._repair_loop(stop))

    async def _repair_loop(self, stop: asyncio.Event) -> None:
        """Its own loop, so that a slow segment scan never delays a report or a repair."""
        while not stop.is_set():
            await self._report_corrupt()
            self.host.repair_corrupt()
            await _sleep(stop, REPAIR_CHECK_S)

    async def _scrub_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            target, wrapped = next_target(self._targets(refresh=False), self.cursor)
            if wrapped:  # a new pass walks the segments closed since the last one too
                target, wrapped = next_target(self._targets(refresh=True), self.cursor)
            if target is None:
                await _sleep(stop, self.idle_s)
                continue
            if wrapped:
                wait_ms = self.pass_started_ms + self.interval_ms - _now_ms()
                if wait_ms > 0:
                    await _sleep(stop, min(wait_ms / 1000, self.idle_s))
                    continue
                self.pass_started_ms = _now_ms()
            if self.cursor is None:
                self.pass_started_ms = _now_ms()
            await self._scrub(target, stop)
            self.cursor = target.key
            if time.monotonic() - self._cursor_checkpointed_s >= CURSOR_CHECKPOINT_INTERVAL_S:
                self._cursor_checkpointed_s = time.monotonic()
                write_atomically(self.cursor_path, encode_cursor(self.cursor))

    def _targets(self, *, refresh: bool) -> list[ScrubTarget]:
        """The closed segments of this pass, listed once per pass (and, while there are none,
        once per `idle_s`): listing walks every hosted partition, which an idle broker with
        thousands of them must not do for every segment it scrubs. A segment deleted since
        the listing is skipped by the scan."""
        stale = not self._listed and time.monotonic() - self._listed_s >= self.idle_s
        if refresh or stale:
            self._listed = sorted(self._closed_segments())
            self._listed_s = time.monotonic()
        return self._listed

    def _closed_segments(self) -> list[ScrubTarget]:
        return [
            ScrubTarget(hosted.topic, hosted.partition, base_offset, next_base, size_bytes)
            for hosted in self.host.partitions.values()
            if hosted.corrupt_from is None  # already known bad: repair first
            for base_offset, next_base, size_bytes in hosted.log.closed_segments()
        ]

    async def _scrub(self, target: ScrubTarget, stop: asyncio.Event) -> None:
        """Re-check one segment; mark its partition if a second look agrees it is bad."""
        verdict = await self._scan(target, stop, budgeted=True)
        if verdict is None or not verdict.corrupt:
            return
        # The file may have changed under the first scan without changing size: look again,
        # unbudgeted (corruption is rare; a bad replica should leave the ISR soon).
        again = await self._scan(target, stop, budgeted=False)
        hosted = self.host.get(target.topic, target.partition)
        if again != verdict or hosted is None:
            return
        if self.host.mark_corrupt(hosted, verdict.corrupt_batch(target)):
            log.error(
                "corrupt batch at rest: leaving the ISR to re-fetch from a clean replica",
                extra={
                    "partition": f"{target.topic}-{target.partition}",
                    "segment_base_offset": target.base_offset,
                    "position": verdict.position,
                    "corrupt_from": verdict.first_corrupt_offset,
                    "reason": verdict.reason,
                    "is_leader": hosted.is_leader,
                },
            )

    async def _scan(
        self, target: ScrubTarget, stop: asyncio.Event, *, budgeted: bool
    ) -> ScrubVerdict | None:
        """Feed one closed segment to the recovery scan chunk by chunk, yielding between
        chunks; None when it went away (or the broker stops) before the scan finished."""
        scan = SegmentScan(
            target.base_offset,
            index_interval_bytes=SCRUB_INDEX_INTERVAL_BYTES,
            next_offset_end=target.next_offset_end,
        )
        want = SCRUB_CHUNK_BYTES
        while want:
            size = read_size(want, scan.valid_bytes, target.size_bytes)
            wait_ms = self.budget.wait_ms(size, _now_ms()) if budgeted else 0
            if wait_ms:
                await _sleep(stop, wait_ms / 1000)
            else:
                await asyncio.sleep(0)  # let requests in between chunks
            hosted = self.host.get(target.topic, target.partition)
            if stop.is_set() or hosted is None or hosted.corrupt is not None:
                return None
            chunk = hosted.log.read_closed_segment(
                target.base_offset, target.size_bytes, scan.valid_bytes, size
            )
            if chunk is None:
                return None  # deleted or rewritten meanwhile: the next pass sees the new one
            if budgeted:
                self.budget.spend(len(chunk), _now_ms())
            self.bytes_checked += len(chunk)
            want = scan.feed(chunk, end_of_file=scan.valid_bytes + len(chunk) >= target.size_bytes)
        self.segments_checked += 1
        return ScrubVerdict.of(scan, target.size_bytes)

    async def _report_corrupt(self) -> None:
        """Ask the controller to take each corrupt replica still in its ISR or its eligible
        leader replicas out of them."""
        now_s = time.monotonic()
        # Only partitions known corrupt, or with a report to forget: corruption is rare.
        for key in list(self.host.corrupt_partitions | self._next_report_s.keys()):
            hosted = self.host.get(*key)
            state = None if hosted is None else hosted.state
            if hosted is None or hosted.corrupt_from is None or state is None:
                self._next_report_s.pop(key, None)
                self._refusal_logged.discard(key)
                continue
            listed = self.host.broker_id in state.isr or self.host.broker_id in state.elr
            if not listed or self._next_report_s.get(key, 0) > now_s:
                continue
            self._next_report_s[key] = now_s + REPORT_RETRY_S
            await self._report(key, hosted, hosted.corrupt_from)

    async def _report(self, key: tuple[str, int], hosted: HostedPartition, offset: int) -> None:
        state = hosted.state
        assert state is not None
        request = controller_pb2.ReportCorruptReplicaRequest(
            broker_id=self.host.broker_id,
            broker_epoch=self.broker_epoch(),
            topic=key[0],
            partition=key[1],
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            first_corrupt_offset=offset,
        )
        try:
            response = await self.channel.write("ReportCorruptReplica", request)
        except (ControllerUnavailableError, grpc.aio.AioRpcError) as error:
            log.warning("ReportCorruptReplica failed: %s", error)
            return
        where = f"{key[0]}-{key[1]}"
        if response.error_code == ErrorCode.NONE:
            log.warning(
                "corrupt replica leaves the ISR",
                extra={
                    "partition": where,
                    "leader": response.leader,
                    "leader_epoch": response.leader_epoch,
                    "isr": list(response.isr),
                },
            )
        elif response.error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE:
            if key not in self._refusal_logged:
                self._refusal_logged.add(key)
                log.error(
                    "corrupt replica is the only in-sync or eligible copy: keeping its log",
                    extra={"partition": where, "error_message": response.error_message},
                )
        else:
            log.warning(
                "ReportCorruptReplica refused",
                extra={
                    "partition": where,
                    "error": ErrorCode(response.error_code).name,
                    "error_message": response.error_message,
                },
            )


async def run_scrubber(
    host: PartitionHost,
    channel: ControllerChannel,
    broker_epoch: Callable[[], int],
    stop: asyncio.Event,
    *,
    bytes_per_second: int,
    interval_ms: int,
) -> None:
    """Run the scrubber until `stop` is set; a rate of 0 disables it."""
    if bytes_per_second <= 0:
        return
    scrubber = Scrubber(
        host, channel, broker_epoch, bytes_per_second=bytes_per_second, interval_ms=interval_ms
    )
    await scrubber.run(stop)  # an error is logged, and the scrubber restarted, by the broker


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)

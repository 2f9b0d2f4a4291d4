"""Storage-engine benchmark: the partition log against the raw disk, in one run.

Append: the same batches (1 KiB, 64 KiB, 1 MiB) written N times through `Log.append_as_leader` and
through a bare `os.write` loop to a file in the same directory. Runs alternate raw/log/raw/log… and
each side reports its median, so a burst of noise from other tenants hits both. Neither side
fsyncs (Kafka's default flush policy: leave it to the OS and rely on replication).

Append check: the leader checks every records section before it stores it (issue 9: a batch no
reader can decode must never be stored). The same 64 KiB batches appended to one log with that
check and with it replaced by a no-op (the header-only path of earlier versions), alternating in
blocks, so the cost is measured in one run: uncompressed with 1 KiB and 100 B records (keyless),
100 B records each with a key and a header, and zstd (which the check must inflate).

Read: the log read back sequentially in 1 MiB fetches, next to `os.pread` of the same file.

Compaction: a cleanup.policy=compact log of 100 B records over 20,000 keys, compacted once on
the calling thread (what a broker's event loop did before the cleaner thread: it answered nothing
for that long) and once, from a copy of the same files, by the broker's cleaner
(`log_cleaner.clean_partition`: the pass on a worker thread) while a 1 ms ticker runs on the
event loop; the ticker's longest and p99 gaps are how long the loop waited at most.

Recovery: a child process writes a log and exits with `os._exit` (no close, no clean-shutdown
marker, recovery point 0 — a real unclean stop), then the parent times `Log.open`, which re-checks
every batch's framing and CRC and rebuilds the indexes. The page cache is warm, as it is after a
process crash (not after a power loss), so this measures the CPU cost of recovery.

Units: throughput is MiB/s (2^20 bytes) of batch bytes, as the labels say; the cluster benches'
MB/s (figures.py) are 10^6 bytes of record values.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from samsa.common.record.codec import build_batch
from samsa.common.record.header import COMPRESSION_ZSTD, HEADER_BYTES
from samsa.services.broker.log import append_info
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
from samsa.services.broker.log_cleaner import clean_partition

MIB = 1024 * 1024
GIB = 1024 * MIB


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def make_batch(batch_bytes: int, record_bytes: int = 1000) -> bytes:
    """One uncompressed batch of at most `batch_bytes` (header included, so that a 1 MiB batch
    fits Kafka's default max.message.bytes), of incompressible random values."""
    per_record_overhead = 24  # int32 offset delta, key/value lengths, header count; int64 time
    room = batch_bytes - HEADER_BYTES
    count = max(1, room // (record_bytes + per_record_overhead))
    value_bytes = max(1, min(record_bytes, room - per_record_overhead))
    values = [os.urandom(value_bytes) for _ in range(count)]
    return build_batch(values, timestamps=_now_ms())


@dataclass
class AppendFigures:
    batch_bytes: int
    appends: int
    log_seconds: float
    raw_seconds: float

    @property
    def total_bytes(self) -> int:
        return self.batch_bytes * self.appends


def _raw_write(path: Path, batch: bytes, appends: int) -> float:
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(appends):
            os.write(fd, batch)
    finally:
        os.close(fd)
    return time.perf_counter() - started


@contextmanager
def _records_section_check(enabled: bool) -> Iterator[None]:
    """With enabled=False, the leader's records-section check is a no-op: the header-only append
    path as it was before the check existed (for the bench's before/after figures only)."""
    saved = append_info.check_records
    if not enabled:
        append_info.check_records = lambda *_, **__: None  # type: ignore[assignment]
    try:
        yield
    finally:
        append_info.check_records = saved


def make_keyed_batch(batch_bytes: int, record_bytes: int) -> bytes:
    """Records of `record_bytes` with a distinct key and one header each (a traced producer)."""
    count = (batch_bytes - HEADER_BYTES) // (record_bytes + 24 + 12 + 8 + 6)
    return build_batch(
        [os.urandom(record_bytes) for _ in range(count)],
        keys=[b"user-%06d" % n for n in range(count)],
        headers=[[("trace", b"0")]] * count,
        timestamps=_now_ms(),
    )


def make_zstd_batch(batch_bytes: int, record_bytes: int = 1000) -> bytes:
    """A zstd batch whose compressed size is about `batch_bytes` (values compress ~3:1)."""
    alphabet = b"abcdefghijklmnop"
    count = max(1, 3 * batch_bytes // (record_bytes + 24))
    values = [bytes(random.choices(alphabet, k=record_bytes)) for _ in range(count)]
    return build_batch(values, timestamps=_now_ms(), compression=COMPRESSION_ZSTD)


def _log_append(directory: Path, batch: bytes, appends: int) -> float:
    """Seconds for the appends alone: opening is not on the write path, and closing fsyncs
    (which the raw side does not do either)."""
    log = Log.open(directory, LogConfig(), now_ms=_now_ms())
    now_ms = _now_ms()
    log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)  # the epoch checkpoint, once
    started = time.perf_counter()
    for _ in range(appends - 1):
        log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)
    seconds = time.perf_counter() - started
    log.close()
    return seconds * appends / max(appends - 1, 1)


def bench_append(root: Path, batch_bytes: int, total_bytes: int, rounds: int = 3) -> AppendFigures:
    batch = make_batch(batch_bytes)
    appends = max(1, total_bytes // len(batch))
    raw_times, log_times = [], []
    for round_index in range(rounds):
        raw_path = root / f"raw-{round_index}.bin"
        raw_times.append(_raw_write(raw_path, batch, appends))
        raw_path.unlink()
        log_dir = root / f"log-{round_index}"
        log_times.append(_log_append(log_dir, batch, appends))
        shutil.rmtree(log_dir)
    return AppendFigures(
        len(batch), appends, statistics.median(log_times), statistics.median(raw_times)
    )


def bench_append_check(
    root: Path, batch: bytes, total_bytes: int, block_appends: int = 64
) -> tuple[float, float]:
    """(checked MiB/s, header-only MiB/s): the same appends to one log, alternating in blocks of
    `block_appends` between the check and the no-op, median per block, so the log's growth and
    the machine's noise hit both alike."""
    blocks = max(2, total_bytes // (len(batch) * block_appends))
    times: dict[bool, list[float]] = {True: [], False: []}
    directory = root / "check"
    log = Log.open(directory, LogConfig(), now_ms=_now_ms())
    now_ms = _now_ms()
    log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)
    for _ in range(blocks):
        for enabled in (True, False):
            with _records_section_check(enabled):
                started = time.perf_counter()
                for _ in range(block_appends):
                    log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)
                times[enabled].append(time.perf_counter() - started)
    log.close()
    shutil.rmtree(directory)
    size = len(batch) * block_appends / MIB
    return size / statistics.median(times[True]), size / statistics.median(times[False])


def bench_read(root: Path, total_bytes: int) -> tuple[float, float, int]:
    """(log seconds, raw pread seconds, bytes) to read a log of 1 MiB batches end to end."""
    batch = make_batch(MIB)
    directory = root / "read"
    log = Log.open(directory, LogConfig(), now_ms=_now_ms())
    for _ in range(max(1, total_bytes // len(batch))):
        log.append_as_leader(batch, leader_epoch=0, now_ms=_now_ms())
    log.flush()
    read_bytes = 0
    started = time.perf_counter()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, MIB)
        read_bytes += len(result.records)
        offset = result.next_offset
    log_seconds = time.perf_counter() - started
    log.close()
    segment = sorted(directory.glob("*.log"))[0]
    started = time.perf_counter()
    fd = os.open(segment, os.O_RDONLY)
    try:
        position = 0
        while chunk := os.pread(fd, MIB, position):
            position += len(chunk)
    finally:
        os.close(fd)
    raw_seconds = time.perf_counter() - started
    shutil.rmtree(directory)
    return log_seconds, raw_seconds, read_bytes


@dataclass
class CompactionFigures:
    log_bytes: int
    inline_seconds: float
    threaded_seconds: float
    loop_gap_max_s: float
    loop_gap_p99_s: float


def bench_compaction(root: Path, total_bytes: int) -> CompactionFigures:
    """One pass on the calling thread, one by the broker's cleaner beside a 1 ms loop ticker."""
    config = LogConfig(segment_bytes=8 * MIB, cleanup_policy=frozenset({"compact"}))
    inline_dir, threaded_dir = root / "compact-inline", root / "compact-threaded"
    log = Log.open(inline_dir, config, now_ms=0)
    values = [random.randbytes(100) for _ in range(100)]
    written = 0
    while log.size_bytes() < total_bytes:
        keys = [b"key-%05d" % ((written + i) % 20_000) for i in range(len(values))]
        log.append_as_leader(build_batch(values, keys=keys), leader_epoch=0, now_ms=0)
        written += len(values)
    log_bytes, end = log.size_bytes(), log.log_end_offset
    log.close()
    shutil.copytree(inline_dir, threaded_dir)

    log = Log.open(inline_dir, config, now_ms=0)
    started = time.perf_counter()
    log.compact(now_ms=0, high_watermark=end)
    inline_seconds = time.perf_counter() - started
    log.close()

    log = Log.open(threaded_dir, config, now_ms=0)
    partition = SimpleNamespace(log=log, high_watermark=end, topic="bench", partition=0)
    gaps: list[float] = []

    async def pass_beside_a_ticker() -> float:
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticking = asyncio.create_task(ticker())
        never: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        result = await clean_partition(partition, never, threading.Event())  # type: ignore[arg-type]
        seconds = time.perf_counter() - started
        done.set()
        await ticking
        assert result is not None and result.records_removed > 0, "the pass removed nothing"
        return seconds

    threaded_seconds = asyncio.run(pass_beside_a_ticker())
    log.close()
    gaps.sort()
    shutil.rmtree(inline_dir)
    shutil.rmtree(threaded_dir)
    return CompactionFigures(
        log_bytes, inline_seconds, threaded_seconds, gaps[-1], gaps[int(len(gaps) * 0.99)]
    )


_UNCLEAN_WRITER = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, {bench_parent!r})
from bench.storage_bench import make_batch
from samsa.services.broker.log.config import LogConfig
from samsa.services.broker.log.log import Log
log = Log.open(Path({directory!r}), LogConfig(), now_ms=time.time_ns() // 1_000_000)
batch = make_batch({batch_bytes})
for _ in range({total_bytes} // len(batch)):
    log.append_as_leader(batch, leader_epoch=0, now_ms=time.time_ns() // 1_000_000)
os._exit(0)  # no flush, no close: an unclean stop
"""


def bench_recovery(root: Path, batch_bytes: int, total_bytes: int) -> tuple[float, int]:
    """(seconds to reopen after an unclean stop, bytes recovered)."""
    directory = root / f"recovery-{batch_bytes}"
    script = _UNCLEAN_WRITER.format(
        bench_parent=str(Path(__file__).resolve().parents[1]),
        directory=str(directory),
        batch_bytes=batch_bytes,
        total_bytes=total_bytes,
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=600)
    size = sum(path.stat().st_size for path in directory.glob("*.log"))
    started = time.perf_counter()
    log = Log.open(directory, LogConfig(), now_ms=_now_ms())
    seconds = time.perf_counter() - started
    assert log.log_end_offset > 0, "recovery lost the log"
    log.close()
    shutil.rmtree(directory)
    return seconds, size


def run_storage_bench(scale: float = 1.0) -> list[str]:
    """Run every storage figure and return printable lines."""
    root = Path(tempfile.mkdtemp(prefix="samsa-bench-", dir=os.environ.get("SAMSA_BENCH_DIR")))
    lines = [
        f"storage (directory {root}, no fsync on either side, median of 3 interleaved rounds)",
        f"{'append':<22}{'samsa MiB/s':>12}{'batches/s':>12}{'raw MiB/s':>12}{'ratio':>8}",
    ]
    try:
        for batch_bytes, total in ((1024, 16 * MIB), (64 * 1024, 128 * MIB), (MIB, 256 * MIB)):
            figures = bench_append(root, batch_bytes, int(total * scale))
            log_rate = figures.total_bytes / figures.log_seconds / MIB
            raw_rate = figures.total_bytes / figures.raw_seconds / MIB
            lines.append(
                f"{_size_label(batch_bytes) + ' batches':<22}{log_rate:>12,.0f}"
                f"{figures.appends / figures.log_seconds:>12,.0f}{raw_rate:>12,.0f}"
                f"{log_rate / raw_rate:>8.0%}"
            )
        lines.append(
            f"{'append check, 64 KiB':<22}{'checked':>12}{'header-only':>12}{'':>12}{'kept':>8}"
        )
        for label, batch in (
            ("1 KiB records", make_batch(64 * 1024)),
            ("100 B records", make_batch(64 * 1024, record_bytes=100)),
            ("100 B, key + header", make_keyed_batch(64 * 1024, record_bytes=100)),
            ("zstd, 1 KiB records", make_zstd_batch(64 * 1024)),
        ):
            checked, header_only = bench_append_check(root, batch, int(128 * MIB * scale))
            lines.append(
                f"{label:<22}{checked:>12,.0f}{header_only:>12,.0f}{'MiB/s':>12}"
                f"{checked / header_only:>8.0%}"
            )
        log_seconds, raw_seconds, read_bytes = bench_read(root, int(256 * MIB * scale))
        lines.append(
            f"{'read (1 MiB fetches)':<22}{read_bytes / log_seconds / MIB:>12,.0f}{'':>12}"
            f"{read_bytes / raw_seconds / MIB:>12,.0f}{raw_seconds / log_seconds:>8.0%}"
        )
        compaction = bench_compaction(root, int(96 * MIB * scale))
        lines.append(
            f"{'compaction':<22}{'pass s':>12}{'MiB/s':>12}{'loop max ms':>12}{'p99 ms':>8}"
        )
        for label, seconds, gap_max, gap_p99 in (
            ("on the event loop", compaction.inline_seconds, compaction.inline_seconds, None),
            (
                "cleaner thread",
                compaction.threaded_seconds,
                compaction.loop_gap_max_s,
                compaction.loop_gap_p99_s,
            ),
        ):
            p99 = "" if gap_p99 is None else f"{gap_p99 * 1000:.1f}"
            lines.append(
                f"{label:<22}{seconds:>12.2f}{compaction.log_bytes / seconds / MIB:>12,.0f}"
                f"{gap_max * 1000:>12,.1f}{p99:>8}"
            )
        lines.append(f"{'recovery':<22}{'s/GiB':>12}{'GiB/s':>12}")
        for batch_bytes in (64 * 1024, MIB):
            seconds, size = bench_recovery(root, batch_bytes, int(512 * MIB * scale))
            lines.append(
                f"{_size_label(batch_bytes) + ' batches':<22}{seconds / (size / GIB):>12.2f}"
                f"{size / GIB / seconds:>12.2f}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return lines


def _size_label(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // 1024} KiB"


if __name__ == "__main__":
    print("\n".join(run_storage_bench()))

"""Goal: DescribeLogDirs reads the disk's figures off the event loop, one read at a time: calls
arriving while a read is in progress (a hung file system's statvfs never returns) share it
instead of each taking a thread of the loop's default executor, and a caller that goes away
does not cancel the read the others wait for. A read that fails is the answer's storage error.

Method: the servicer's `_read_disk` with the module's `_disk_space` replaced by one that blocks
on a threading.Event and counts its calls; five concurrent callers, one of them cancelled, then
the event set. Then the real `_disk_space` on tmp_path and on a path that does not exist.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from samsa.services.broker import servicer as servicer_module
from samsa.services.broker.requests.describe_log_dirs import DiskSpace
from samsa.services.broker.servicer import BrokerServicer


def test_concurrent_calls_share_one_read_and_a_cancelled_one_does_not_end_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    release = threading.Event()
    calls = []

    def blocking_read(data_dir: Path) -> tuple[str, DiskSpace | str]:
        calls.append(data_dir)
        release.wait(10)
        return str(data_dir), DiskSpace(100, 40)

    monkeypatch.setattr(servicer_module, "_disk_space", blocking_read)
    host = SimpleNamespace(data_dir=tmp_path)
    servicer = BrokerServicer(host, member_key=b"k", producer_ids=None)  # type: ignore[arg-type]

    async def run() -> list[tuple[str, DiskSpace | str]]:
        readers = [asyncio.ensure_future(servicer._read_disk()) for _ in range(5)]
        await asyncio.sleep(0)
        readers[0].cancel()
        await asyncio.sleep(0)
        release.set()
        answers = await asyncio.gather(*readers[1:])
        again = await servicer._read_disk()  # the shared read is over: a new one
        return [*answers, again]

    answers = asyncio.run(run())
    assert answers == [(str(tmp_path), DiskSpace(100, 40))] * 5
    assert len(calls) == 2


def test_the_disk_space_of_a_directory_and_of_one_that_cannot_be_read(tmp_path: Path) -> None:
    path, disk = servicer_module._disk_space(tmp_path)
    assert path == str(tmp_path.absolute())
    assert isinstance(disk, DiskSpace) and 0 < disk.usable_bytes <= disk.total_bytes
    _, missing = servicer_module._disk_space(tmp_path / "gone")
    assert isinstance(missing, str) and "cannot read the disk space of" in missing

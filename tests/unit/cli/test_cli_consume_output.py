"""Goal: `samsa consume --group G` commits exactly the records it printed (README), so a record
whose line could not be written (a full disk, a reader gone) is not committed: the group's next
run reads it again instead of skipping it. A negative --offset is a usage error, not a traceback.

Method: `_print_records` (the loop behind `samsa consume`) with a fake consumer handing out two
polls of records and a stdout whose second flush fails with ENOSPC, as `> file` on a full disk;
`run()` on the parsed flags with no cluster behind them for the usage error.
"""

from __future__ import annotations

import argparse
import errno
import sys
from types import SimpleNamespace

import pytest

from samsa.cli.commands import add_commands, run
from samsa.cli.console_commands import _print_records, prepare_console
from samsa.cli.console_format import VALUE_FORMAT


class FakeConsumer:
    def __init__(self, polls: list[list[SimpleNamespace]]) -> None:
        self.polls = polls

    def poll(self, timeout: float) -> list[SimpleNamespace]:
        return self.polls.pop(0) if self.polls else []


class FullDisk:
    """A binary stdout whose flushes fail from the `fail_from`-th on, written bytes kept."""

    def __init__(self, fail_from: int) -> None:
        self.fail_from = fail_from
        self.flushes = 0
        self.pending = b""
        self.written = b""

    def write(self, data: bytes) -> int:
        self.pending += data
        return len(data)

    def flush(self) -> None:
        self.flushes += 1
        if self.flushes >= self.fail_from:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.written, self.pending = self.written + self.pending, b""


def record(offset: int) -> SimpleNamespace:
    return SimpleNamespace(
        topic="t", partition=0, offset=offset, key=None, value=b"v%d" % offset, headers=()
    )


def test_records_whose_lines_were_not_written_are_not_committed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = FullDisk(fail_from=2)
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(buffer=out))
    consumer = FakeConsumer([[record(0), record(1)], [record(2), record(3)]])
    args = argparse.Namespace(format="value", record_format=VALUE_FORMAT, count=None, timeout=0)
    printed_up_to: dict[tuple[str, int], int] = {}
    with pytest.raises(OSError):
        _print_records(consumer, args, printed_up_to)  # type: ignore[arg-type]
    assert out.written == b"v0\nv1\n"
    assert printed_up_to == {("t", 0): 2}, "offsets 2 and 3 were never written"


class InterruptedAfterFlush(FullDisk):
    """A binary stdout whose first flush writes, then a SIGTERM lands (command_support's
    Terminated is a KeyboardInterrupt) before the flush's caller runs another line: the reader
    that saw the lines sent it."""

    def flush(self) -> None:
        self.written, self.pending = self.written + self.pending, b""
        raise KeyboardInterrupt


def test_lines_out_when_a_stop_lands_are_counted_and_committed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`samsa consume` stopped right as its lines reached the reader said "consumed 0 records"
    and committed nothing, so the group's next run printed them again."""
    out = InterruptedAfterFlush(fail_from=99)
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(buffer=out))
    consumer = FakeConsumer([[record(0), record(1)]])
    args = argparse.Namespace(format="value", record_format=VALUE_FORMAT, count=None, timeout=0)
    printed_up_to: dict[tuple[str, int], int] = {}
    assert _print_records(consumer, args, printed_up_to) == 0  # type: ignore[arg-type]
    assert out.written == b"v0\nv1\n"
    assert printed_up_to == {("t", 0): 2}
    assert "consumed 2 records" in capsys.readouterr().err


class RawInterrupted:
    """An unbuffered binary stdout (PYTHONUNBUFFERED: a FileIO, each write goes to the reader at
    once) taking at most `chunk` bytes a call, whose reader sends SIGTERM on seeing the first."""

    def __init__(self, chunk: int) -> None:
        self.chunk = chunk
        self.written = b""

    def write(self, data: bytes | memoryview) -> int:
        self.written += bytes(data[: self.chunk])
        if len(self.written) >= len(b"v0\nv1\n"):
            raise KeyboardInterrupt
        return min(len(data), self.chunk)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_lines_out_on_an_unbuffered_stdout_are_counted_and_committed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], chunk: int
) -> None:
    """Under PYTHONUNBUFFERED a line written per record reached the reader before it was
    counted: stopped there, `samsa consume --group` said "consumed 0 records" and committed
    none of the lines its reader had (seen in CI)."""
    out = RawInterrupted(chunk)
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(buffer=out))
    consumer = FakeConsumer([[record(0), record(1)]])
    args = argparse.Namespace(format="value", record_format=VALUE_FORMAT, count=None, timeout=0)
    printed_up_to: dict[tuple[str, int], int] = {}
    assert _print_records(consumer, args, printed_up_to) == 0  # type: ignore[arg-type]
    assert out.written == b"v0\nv1\n", "a partial write is written on"
    assert printed_up_to == {("t", 0): 2}
    assert "consumed 2 records" in capsys.readouterr().err


def test_a_negative_offset_is_a_usage_error_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    argv = ["consume", "t", "--offset", "-5", "--bootstrap-server", "127.0.0.1:1"]
    args = parser.parse_args(argv)
    assert run(args) == 2  # not the SDK's ValueError, raised once connected, as a traceback
    assert "samsa consume: --offset -5: an offset is 0 or more" in capsys.readouterr().err


@pytest.mark.parametrize(("count", "expected"), [("-1", None), ("0", 0), ("3", 3)])
def test_count_minus_one_is_no_limit_as_kafkas_max_messages(count: str, expected) -> None:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["consume", "t", "--max-messages", count])
    assert prepare_console(args) is None and args.count == expected


def test_another_negative_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["consume", "t", "--count", "-2", "--bootstrap-server", "h:1"])
    assert run(args) == 2
    assert "--count -2: a count is 0 or more, or -1 for no limit" in capsys.readouterr().err

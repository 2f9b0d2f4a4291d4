"""`samsa dump-log`: what a partition's files on disk hold, as Kafka's kafka-dump-log.sh — read
from the files alone, with no broker (stop it first, or read a copy: the files of a live one
change under the reader).

    --files F[,F...] [--print-data-log] [--deep-iteration] [--index-sanity-check]
    [--verify-index-only] [--max-bytes N] [--json]

Per file, by suffix: `.log` (each batch; with --deep-iteration each record's offset, timestamp,
sizes, sequence and header keys; --print-data-log adds the key and payload, or a marker's type
and coordinator epoch), `.index` and `.timeindex` (each entry, then each entry the `.log` beside
it contradicts; --verify-index-only prints only those; --index-sanity-check runs the broker's
startup check instead), `.txnindex` (aborted transactions) and `.snapshot` (producer state).
The decoding is the broker's own (services/broker/log/dump.py, dump_indexes.py); this module
reads the files — a `.log` in chunks, never whole — and prints.

Exit status: 0, or 1 when a file has a corrupt region, an index disagrees with its log (or
--verify-index-only finds no `.log` beside it), or a file cannot be read; 2 for a usage error
(no file, an unknown suffix, --max-bytes below 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.cli import dump_log_format as fmt

if TYPE_CHECKING:
    from samsa.services.broker.log.dump import LogDump

SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
Emit = Callable[[str], None]


def add_dump_log_command(commands: Any) -> None:
    parser = commands.add_parser(
        "dump-log",
        help="print what a partition's .log, .index, .timeindex, .txnindex and .snapshot files "
        "hold (kafka-dump-log.sh)",
    )
    parser.add_argument("--files", required=True, metavar="F[,F...]", help="files to dump")
    parser.add_argument(
        "--print-data-log", action="store_true", help="print each record's key and payload"
    )
    parser.add_argument("--deep-iteration", action="store_true", help="print each record")
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="run the broker's startup check on index files instead of printing them",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="print only the index entries the .log contradicts",
    )
    parser.add_argument(
        "--max-bytes", type=int, metavar="N", help="read at most N bytes of each .log file"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document instead of lines")


def dump_log_usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, or None once `args.paths` holds the files."""
    args.paths = [Path(item.strip()) for item in args.files.split(",") if item.strip()]
    if not args.paths:
        return "--files names no file: give F[,F...]"
    for path in args.paths:
        if not path.name.endswith(SUFFIXES):
            return (
                f"{path} is not a file dump-log reads: its name must end with one of "
                f"{', '.join(SUFFIXES)}"
            )
    if args.max_bytes is not None and args.max_bytes < 1:
        return f"--max-bytes {args.max_bytes} must be at least 1"
    return None


def run_dump_log(args: argparse.Namespace) -> int:
    problem = dump_log_usage_error(args)
    if problem is not None:
        print(f"samsa dump-log: {problem}", file=sys.stderr)
        return 2
    args.deep = args.deep_iteration or args.print_data_log
    failed = False
    if args.json:
        sys.stdout.write('{"files": [')
    for number, path in enumerate(args.paths):
        emit: Emit = print
        if args.json:
            sys.stdout.write(",\n" if number else "\n")
            emit = sys.stdout.write
        try:
            failed |= _dump(path, args, emit)
        except BrokenPipeError:
            raise  # the reader went away: main() ends quietly
        except OSError as error:
            if args.json:
                emit(json.dumps({"file": str(path), "error": str(error)}))
            print(f"samsa dump-log: cannot read {path}: {error.strerror or error}", file=sys.stderr)
            failed = True
    if args.json:
        sys.stdout.write("\n]}\n")
    return 1 if failed else 0


def _dump(path: Path, args: argparse.Namespace, emit: Emit) -> bool:
    """Dump one file; True when it is corrupt or contradicted."""
    from samsa.services.broker.log.segment import parse_base_offset

    suffix = next(s for s in SUFFIXES if path.name.endswith(s))
    base_offset = parse_base_offset(path.name, suffix)
    if suffix == ".log":
        return _dump_log(path, base_offset, args, emit)
    if not args.json:
        emit(f"Dumping {path}")
    data = path.read_bytes()
    if suffix in (".index", ".timeindex"):
        return _dump_index(path, data, base_offset or 0, suffix == ".timeindex", args, emit)
    if suffix == ".txnindex":
        return _dump_txn_index(path, data, args, emit)
    return _dump_snapshot(path, data, args, emit)


def _open_log(path: Path, **options: Any) -> tuple[LogDump, int, Callable[[], None]]:
    """A LogDump reading `path` by pread, the file's size, and the close."""
    from samsa.services.broker.log.dump import LogDump

    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    return LogDump(lambda p, n: os.pread(fd, n, p), size, **options), size, lambda: os.close(fd)


def _dump_log(path: Path, base_offset: int | None, args: argparse.Namespace, emit: Emit) -> bool:
    dump, size, close = _open_log(
        path, base_offset=base_offset, deep=args.deep, max_bytes=args.max_bytes
    )
    try:
        if args.json:
            emit(f'{{"file": {json.dumps(str(path))}, "kind": "log", "batches": [')
            for number, batch in enumerate(dump.batches()):
                batch_object = fmt.batch_json(batch, deep=args.deep, data=args.print_data_log)
                emit((",\n" if number else "\n") + json.dumps(batch_object))
        else:
            emit(f"Dumping {path}")
            emit(f"Log starting offset: {base_offset if base_offset is not None else 'unknown'}")
            for batch in dump.batches():
                _emit_batch_lines(batch, args, emit)
    finally:
        close()
    verdict = dump.verdict
    assert verdict is not None
    if args.json:
        emit(f'\n], "verdict": {json.dumps(fmt.verdict_json(verdict))}}}')
    else:
        for line in fmt.verdict_lines(verdict, size, args.max_bytes):
            emit(line)
    return verdict.corrupt


def _emit_batch_lines(batch: Any, args: argparse.Namespace, emit: Emit) -> None:
    emit(fmt.batch_line(batch))
    if batch.problem is not None:
        emit(f"  problem: {batch.problem}")
    if batch.records_error is not None:
        emit(f"| records unreadable: {batch.records_error}")
    for record in batch.records or ():
        emit(
            fmt.record_line(
                record,
                log_append_time=batch.header.is_log_append_time,
                data=args.print_data_log,
            )
        )


def _log_headers(log_path: Path) -> tuple[Iterator[tuple[int, Any]], Callable[[], int]]:
    """Every (position, header) of a .log, streamed, and how many bytes the walk covered."""
    dump, _, close = _open_log(log_path)

    def headers() -> Iterator[tuple[int, Any]]:
        try:
            for batch in dump.batches():
                yield batch.position, batch.header
        finally:
            close()

    return headers(), lambda: dump.verdict.end_position if dump.verdict else 0


def _dump_index(
    path: Path, data: bytes, base_offset: int, time: bool, args: argparse.Namespace, emit: Emit
) -> bool:
    from samsa.services.broker.log import dump_indexes
    from samsa.services.broker.log.offset_index import CorruptIndexError

    log_path = path.with_name(path.name.rsplit(".", 1)[0] + ".log")
    out: dict[str, Any] = {"file": str(path), "kind": "timeindex" if time else "index"}
    if args.index_sanity_check:
        log_size = log_path.stat().st_size if log_path.exists() else 2**63
        problem = dump_indexes.sanity_check(data, time=time, log_size_bytes=log_size)
        out["sanityCheck"] = problem or "passed"
        if args.json:
            emit(json.dumps(out))
        else:
            emit(f"{path} passed sanity check." if problem is None else f"{path}: {problem}")
        return problem is not None
    try:
        parse = dump_indexes.time_index_entries if time else dump_indexes.offset_index_entries
        entries = parse(data, base_offset)
    except CorruptIndexError as error:
        out["error"] = str(error)
        emit(json.dumps(out) if args.json else f"{path}: {error}")
        return True
    check = (dump_indexes.TimeIndexCheck if time else dump_indexes.OffsetIndexCheck)(entries)
    mismatches: list[str] | None = None
    if log_path.exists():
        headers, walked = _log_headers(log_path)
        for position, header in headers:
            check.on_batch(position, header)
        mismatches = check.mismatches(walked())
    names = ("timestamp", "offset") if time else ("offset", "position")
    if args.json:
        out["entries"] = [dict(zip(names, entry, strict=True)) for entry in entries]
        out["mismatches"] = mismatches
        emit(json.dumps(out))
    else:
        if not args.verify_index_only:
            for first, second in entries:
                emit(f"{names[0]}: {first} {names[1]}: {second}")
        if mismatches is None:
            emit(f"No {log_path.name} beside it: entries not checked against the log")
        elif mismatches:
            emit(f"Mismatches in {path} against {log_path.name}:")
            for mismatch in mismatches:
                emit(f"  {mismatch}")
        else:
            emit(f"Every entry agrees with {log_path.name}.")
    return bool(mismatches) or (mismatches is None and args.verify_index_only)


def _dump_txn_index(path: Path, data: bytes, args: argparse.Namespace, emit: Emit) -> bool:
    from samsa.services.broker.log.dump_indexes import dump_txn_index

    dumped = dump_txn_index(data)
    if args.json:
        entries = [
            {
                "producerId": entry.producer_id,
                "firstOffset": entry.first_offset,
                "lastOffset": entry.last_offset,
                "lastStableOffset": entry.last_stable_offset,
            }
            for entry in dumped.entries
        ]
        emit(
            json.dumps(
                {
                    "file": str(path),
                    "kind": "txnindex",
                    "abortedTransactions": entries,
                    "problem": dumped.problem,
                }
            )
        )
    else:
        for entry in dumped.entries:
            emit(
                f"producerId: {entry.producer_id} firstOffset: {entry.first_offset} "
                f"lastOffset: {entry.last_offset} lastStableOffset: {entry.last_stable_offset}"
            )
        if dumped.problem is not None:
            emit(f"Corrupt: {dumped.problem}")
    return dumped.problem is not None


def _dump_snapshot(path: Path, data: bytes, args: argparse.Namespace, emit: Emit) -> bool:
    from samsa.services.broker.log.dump_indexes import dump_snapshot

    snapshot, problem = dump_snapshot(data)
    if args.json:
        out: dict[str, Any] = {"file": str(path), "kind": "snapshot", "problem": problem}
        if snapshot is not None:
            out.update(fmt.snapshot_json(snapshot))
        emit(json.dumps(out))
    elif snapshot is not None:
        for line in fmt.snapshot_lines(snapshot):
            emit(line)
    else:
        emit(f"Corrupt: {problem}")
    return problem is not None

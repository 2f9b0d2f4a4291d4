"""`samsa trace TRACE_ID [--file PATH ...]`: one trace's span tree, from the span files that
OTEL_TRACES_EXPORTER=file writes (common/span_file.py), with no other software (DESIGN §9).

Each line: indentation by depth, the service, the span name, the duration in ms, and the key
attributes (messaging.*, rpc.*; a link shows as `linked to <span id>`). Children are ordered by
start time; a span whose parent is in none of the files (the application's, in a file not given)
is printed as a root, so a partial set of files still shows what it has. PATH may be a file or a
directory (every *.jsonl in it); the default is $SAMSA_TRACES_FILE.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from samsa.common.span_file import read_spans

Span = dict[str, Any]

KEY_ATTRIBUTE_PREFIXES = ("messaging.", "rpc.grpc.status_code")
TRACE_ID = re.compile(r"(0[xX])?[0-9a-fA-F]{32}")


def well_formed(span: Span) -> bool:
    """Whether a line has the shape the file exporter writes (ids are strings, times integers
    or null, attributes a map, links a list of maps with a span id): a span file may be shared
    with other writers, and a line of another shape is left out like a torn one."""
    times_ok = all(
        isinstance(span.get(key), int | None) and not isinstance(span.get(key), bool)
        for key in ("start_ns", "end_ns")
    )
    links = span.get("links") or []
    return (
        isinstance(span["trace_id"], str)
        and isinstance(span["span_id"], str)
        and isinstance(span.get("parent_span_id"), str | None)
        and times_ok
        and isinstance(span.get("attributes") or {}, dict)
        and isinstance(links, list)
        and all(isinstance(link, dict) and "span_id" in link for link in links)
    )


def build_tree(spans: Iterable[Span]) -> list[tuple[int, Span]]:
    """The spans in tree order, each with its depth: roots (no parent, or a parent not among
    the spans) by start time, then each span's children by start time, depth first. Spans whose
    parent links go round in a loop (no exporter writes that, but a file may hold anything) are
    printed as roots too, so each span is printed once."""
    by_id: dict[str, Span] = {}
    for span in spans:
        by_id.setdefault(span["span_id"], span)  # a span written twice counts once
    children: dict[str | None, list[Span]] = {}
    for span in by_id.values():
        parent = span.get("parent_span_id")
        children.setdefault(parent if parent in by_id else None, []).append(span)
    for siblings in children.values():
        siblings.sort(key=_start_order)
    ordered: list[tuple[int, Span]] = []
    reached: set[str] = set()
    roots = children.get(None, [])
    while True:
        stack = [(0, span) for span in reversed(roots)]
        while stack:
            depth, span = stack.pop()
            if span["span_id"] in reached:  # back round a loop to where it was cut
                continue
            reached.add(span["span_id"])
            ordered.append((depth, span))
            stack.extend(
                (depth + 1, child) for child in reversed(children.get(span["span_id"], []))
            )
        if len(reached) == len(by_id):
            return ordered
        # A loop: its earliest span becomes a root, which cuts it.
        roots = [min((s for i, s in by_id.items() if i not in reached), key=_start_order)]


def _start_order(span: Span) -> tuple[int, str]:
    return (span.get("start_ns") or 0, span["span_id"])


def format_span(depth: int, span: Span) -> str:
    duration_ms = ((span.get("end_ns") or 0) - (span.get("start_ns") or 0)) / 1e6
    attributes = span.get("attributes") or {}
    keys = [
        f"{key}={value}"
        for key, value in sorted(attributes.items())
        if key.startswith(KEY_ATTRIBUTE_PREFIXES)
    ]
    keys.extend(f"linked to {link['span_id']}" for link in span.get("links") or [])
    if span.get("status") == "ERROR":
        keys.append("ERROR")
    indent = "  " * depth
    line = f"{indent}{span.get('service', '?')}  {span.get('name', '?')}  {duration_ms:.2f} ms"
    return f"{line}  {' '.join(keys)}" if keys else line


def span_files(paths: Sequence[str]) -> list[str]:
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            files.extend(sorted(str(file) for file in Path(path).glob("*.jsonl")))
        else:
            files.append(path)
    return files


def trace_lines(trace_id: str, paths: Sequence[str]) -> list[str]:
    wanted = trace_id.lower().removeprefix("0x")
    spans = [
        span
        for span in read_spans(span_files(paths))
        if span["trace_id"] == wanted and well_formed(span)
    ]
    return [format_span(depth, span) for depth, span in build_tree(spans)]


def add_trace_command(commands: Any) -> None:
    parser = commands.add_parser("trace", help="print a trace's span tree from span files")
    parser.add_argument("trace_id", help="32 hex digits, as in the span files and log lines")
    parser.add_argument(
        "--file",
        action="append",
        dest="files",
        help="a span file or a directory of *.jsonl (repeatable; default $SAMSA_TRACES_FILE)",
    )


def run_trace(args: argparse.Namespace) -> int:
    default = os.environ.get("SAMSA_TRACES_FILE")
    paths = args.files or ([default] if default else [])
    if not paths:
        print("samsa trace: give --file PATH (or set SAMSA_TRACES_FILE)", file=sys.stderr)
        return 2
    if not TRACE_ID.fullmatch(args.trace_id):
        print(
            f"samsa trace: {args.trace_id!r} is not a trace id: give its 32 hex digits, as the "
            "span files and the log lines' trace_id show them",
            file=sys.stderr,
        )
        return 2
    try:
        lines = trace_lines(args.trace_id, paths)
    except OSError as error:
        print(f"samsa trace: {error}", file=sys.stderr)
        return 1
    if not lines:
        where = ", ".join(paths)
        print(f"samsa trace: no span of trace {args.trace_id} in {where}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0

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
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from samsa.common.span_file import read_spans

Span = dict[str, Any]

KEY_ATTRIBUTE_PREFIXES = ("messaging.", "rpc.grpc.status_code")


def build_tree(spans: Iterable[Span]) -> list[tuple[int, Span]]:
    """The spans in tree order, each with its depth: roots (no parent, or a parent not among
    the spans) by start time, then each span's children by start time, depth first."""
    by_id: dict[str, Span] = {}
    for span in spans:
        by_id.setdefault(span["span_id"], span)  # a span written twice counts once
    children: dict[str | None, list[Span]] = {}
    for span in by_id.values():
        parent = span.get("parent_span_id")
        children.setdefault(parent if parent in by_id else None, []).append(span)
    for siblings in children.values():
        siblings.sort(key=lambda span: (span.get("start_ns") or 0, span["span_id"]))
    ordered: list[tuple[int, Span]] = []
    stack = [(0, span) for span in reversed(children.get(None, []))]
    while stack:
        depth, span = stack.pop()
        ordered.append((depth, span))
        stack.extend((depth + 1, child) for child in reversed(children.get(span["span_id"], [])))
    assert len(ordered) == len(by_id), "every span is reached once: parent links have no cycle"
    return ordered


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
    spans = [span for span in read_spans(span_files(paths)) if span["trace_id"] == wanted]
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

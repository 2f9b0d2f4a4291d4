"""`samsa trace`'s tree builder (trace_command.py): spans from several processes' files become one
tree ordered by parent then start time, an orphan (its parent in no file given) prints as a root,
and each line shows service, name, duration and the key attributes. Method: span dicts as the file
exporter writes them, no processes."""

from __future__ import annotations

import json

from samsa.cli.main import main
from samsa.cli.trace_command import build_tree, format_span

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(span_id, parent, start_ns, name="op", service="svc", **extra):
    return {
        "trace_id": TRACE,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "service": service,
        "start_ns": start_ns,
        "end_ns": start_ns + 2_500_000,
        "attributes": {},
        "links": [],
        **extra,
    }


def test_children_follow_their_parent_by_start_time():
    spans = [
        span("c2", "root", 30),
        span("root", None, 10),
        span("c1", "root", 20),
        span("g1", "c1", 25),
        span("orphan", "missing", 5),
    ]
    assert [(depth, s["span_id"]) for depth, s in build_tree(spans)] == [
        (0, "orphan"),
        (0, "root"),
        (1, "c1"),
        (2, "g1"),
        (1, "c2"),
    ]


def test_a_line_shows_service_name_duration_and_key_attributes():
    consumer = span(
        "c1",
        "root",
        0,
        name="poll orders",
        service="app",
        attributes={"messaging.kafka.offset": 42, "thread.id": 7},
        links=[{"trace_id": TRACE, "span_id": "root", "attributes": {}}],
    )
    assert format_span(1, consumer) == (
        "  app  poll orders  2.50 ms  messaging.kafka.offset=42 linked to root"
    )


def test_the_command_reads_files_and_directories(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text(json.dumps(span("root", None, 1, name="send")) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps(span("child", "root", 2, name="Produce")) + "\n")
    assert main(["trace", TRACE, "--file", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "svc  send  2.50 ms",
        "  svc  Produce  2.50 ms",
    ]
    assert main(["trace", "0" * 32, "--file", str(tmp_path / "a.jsonl")]) == 1


def test_a_line_of_another_shape_is_skipped_not_a_traceback(tmp_path, capsys):
    """A span file may be shared with other writers: a JSON line whose ids or times are not what
    the file exporter writes is left out, like a torn line, instead of ending the command in a
    TypeError."""
    lines = [
        span("root", None, 1, name="send"),
        {**span("odd", "root", 2), "start_ns": "soon"},  # a time that is not a number
        span(["list"], "root", 3),  # an id that is not a string
        {**span("child", "root", 2, name="Produce"), "attributes": "not a map"},
        span("late", "root", 4, name="Fetch"),
    ]
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["trace", TRACE, "--file", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "svc  send  2.50 ms",
        "  svc  Fetch  2.50 ms",
    ]


def test_spans_whose_parents_make_a_loop_still_print():
    spans = [span("a", "b", 1), span("b", "a", 2), span("self", "self", 3), span("r", None, 4)]
    ordered = [(depth, s["span_id"]) for depth, s in build_tree(spans)]
    assert sorted(s for _, s in ordered) == ["a", "b", "r", "self"]  # each once
    assert ordered[0] == (0, "r")


def test_a_trace_id_that_is_not_32_hex_digits_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(span("root", None, 1)) + "\n")
    assert main(["trace", "checkout", "--file", str(path)]) == 2
    assert "32 hex digits" in capsys.readouterr().err
    assert main(["trace", "0x" + TRACE.upper(), "--file", str(path)]) == 0

"""W3C traceparent values (common/traceparent.py), read by the SDK from record headers and by
the broker from ProduceStream requests: valid ones round-trip, anything else is ignored."""

from __future__ import annotations

from samsa.common.traceparent import format_traceparent, parse_traceparent

TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_traceparent_round_trips():
    context = parse_traceparent(TRACEPARENT)
    assert context is not None
    assert context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert context.span_id == 0x00F067AA0BA902B7
    assert context.is_remote and context.trace_flags.sampled
    assert format_traceparent(context).encode() == TRACEPARENT


def test_malformed_traceparents_are_ignored():
    for value in (
        None,
        b"",
        b"garbage",
        b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  # v00 has four fields
        b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",  # nothing after the flags
        b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x\n",
        b"\xff\xfe",
    ):
        assert parse_traceparent(value) is None, value


def test_text_and_later_versions_parse_too():
    assert parse_traceparent(TRACEPARENT.decode()) == parse_traceparent(TRACEPARENT)
    later = parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-next")
    assert later is not None and later.span_id == 0x00F067AA0BA902B7
    assert parse_traceparent("00-" + "1" * 600) is None  # bounded before the regex runs

"""Goal: `--property` prints a consumed record as Kafka's console consumer's default formatter
does (its fields, its order, its separators and null literal) and reads a produced line as its
console producer does (parse.key, key.separator); every property it does not honour is refused
with a message naming it.

Method: the pure formats of console_format.py on hand-made records; no cluster.
"""

from __future__ import annotations

import pytest

from samsa.cli.console_format import (
    KAFKA_FORMAT,
    KEY_VALUE_FORMAT,
    VALUE_FORMAT,
    LineFormat,
    PropertyError,
)
from samsa.client.consumer_records import LOG_APPEND_TIME, ConsumerRecord

RECORD = ConsumerRecord("t", 3, 42, 1_700_000_000_000, b"k", b"v", (("h1", b"a"), ("h2", None)))
APPENDED = ConsumerRecord("t", 1, 9, 1_700_000_000_123, None, b"v", (), LOG_APPEND_TIME)
NULLS = ConsumerRecord("t", 0, 7, 0, None, None, ())


def test_the_plain_formats_print_as_they_always_did() -> None:
    assert VALUE_FORMAT.render(RECORD) == b"v"
    assert KEY_VALUE_FORMAT.render(RECORD) == b"k\tv"
    assert KEY_VALUE_FORMAT.render(NULLS) == b"\t"  # a null as nothing, as before


def test_every_field_comes_in_kafkas_order_with_its_separators() -> None:
    every = KAFKA_FORMAT.with_properties(
        [
            ("print.key", "true"),
            ("print.offset", "true"),
            ("print.partition", "true"),
            ("print.headers", "true"),
        ]
    )
    assert every.render(RECORD) == b"Partition:3\tOffset:42\th1:a,h2:null\tk\tv"
    assert every.render(NULLS) == b"Partition:0\tOffset:7\tNO_HEADERS\tnull\tnull"
    custom = every.with_properties(
        [("key.separator", ","), ("headers.separator", ";"), ("null.literal", "-")]
    )
    assert custom.render(RECORD) == b"Partition:3,Offset:42,h1:a;h2:-,k,v"
    keys_only = KAFKA_FORMAT.with_properties([("print.key", "TRUE"), ("print.value", "false")])
    assert keys_only.render(RECORD) == b"k"
    assert KAFKA_FORMAT.with_properties([("key.separator", "\\t")]).key_separator == b"\t"


def test_the_timestamp_comes_first_named_by_its_type() -> None:
    stamped = KAFKA_FORMAT.with_properties([("print.timestamp", "true"), ("print.offset", "true")])
    assert stamped.render(RECORD) == b"CreateTime:1700000000000\tOffset:42\tv"
    assert stamped.render(APPENDED) == b"LogAppendTime:1700000000123\tOffset:9\tv"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("print.colour", "true", "unknown to samsa consume"),
        ("print.key", "yes", "use true or false"),
        ("key.separator", "", "is empty"),
    ],
)
def test_what_the_consumer_does_not_honour_is_refused(name: str, value: str, says: str) -> None:
    with pytest.raises(PropertyError, match=says):
        KAFKA_FORMAT.with_properties([(name, value)])


def test_a_produced_line_is_split_as_kafkas_console_producer_splits_it() -> None:
    assert LineFormat.from_properties(None, []).split(b"a:b") == (None, b"a:b")
    tabbed = LineFormat.from_properties(None, [("parse.key", "true")])
    assert tabbed.split(b"k\tv\tw") == (b"k", b"v\tw")  # a tab by default; the first one splits
    colon = LineFormat.from_properties(None, [("parse.key", "true"), ("key.separator", ":")])
    assert colon.split(b"k:v") == (b"k", b"v")
    assert colon.split(b"no separator") == (None, b"no separator")
    assert LineFormat.from_properties(":", []).split(b"k:v") == (b"k", b"v")  # --key-separator
    off = LineFormat.from_properties(":", [("parse.key", "false")])
    assert off.split(b"k:v") == (None, b"k:v")
    with pytest.raises(PropertyError, match="--producer-property"):
        LineFormat.from_properties(None, [("acks", "1")])


def test_an_empty_key_separator_flag_is_refused_before_any_line_is_read() -> None:
    # It reached bytes.split(b"", 1) on the first line: a ValueError traceback.
    with pytest.raises(PropertyError, match="--key-separator is empty"):
        LineFormat.from_properties("", [])


def test_json_output_keeps_null_apart_from_empty() -> None:
    """A tombstone (null value) printed as "" read as a record with an empty value."""
    import json

    from samsa.cli.console_commands import _json

    nulls = json.loads(_json(NULLS))
    assert (nulls["key"], nulls["value"]) == (None, None)
    empty = json.loads(_json(ConsumerRecord("t", 0, 8, 0, b"", b"", (("h", None),))))
    assert (empty["key"], empty["value"], empty["headers"]) == ("", "", {"h": None})

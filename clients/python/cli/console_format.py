"""How `samsa consume` prints a record and `samsa produce` reads a line, set by `--property` as
kafka-console-consumer.sh and kafka-console-producer.sh are. Pure: no I/O, tested directly.

The consumer's properties are those of Kafka's default formatter: `print.timestamp`,
`print.partition`, `print.offset`, `print.headers`, `print.key`, `print.value` (true by
default), `key.separator` (between the fields, a tab by default), `headers.separator` (between
headers, `,`), `null.literal` (for a null key or value, `null`). The fields come in Kafka's order
— `CreateTime:T` (or `LogAppendTime:T`), `Partition:P`, `Offset:O`, the headers (`k:v,...`, or
`NO_HEADERS`), the key, the value — so a script that splits Kafka's output splits ours.

The producer's are `parse.key` (each line is KEY SEPARATOR VALUE) and `key.separator` (a tab by
default). A line without the separator is a value with a null key, as with `--key-separator`
(Kafka's console producer stops there with an error).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol


class Record(Protocol):
    timestamp: int
    timestamp_type: int
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


PRINT_FLAGS = frozenset(
    (
        "print.timestamp",
        "print.partition",
        "print.offset",
        "print.headers",
        "print.key",
        "print.value",
    )
)
# Kafka's TimestampType names, by id (consumer_records.CREATE_TIME, LOG_APPEND_TIME).
TIMESTAMP_TYPE_NAMES = {0: b"CreateTime", 1: b"LogAppendTime"}


class PropertyError(ValueError):
    """A --property the console commands do not know, or a value they cannot use."""


def _flag(name: str, text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise PropertyError(f"--property {name}={text}: use true or false")
    return text.lower() == "true"


def _separator(name: str, text: str) -> bytes:
    if not text:
        raise PropertyError(f"--property {name}= is empty: give at least one character")
    # A tab is hard to type in a shell: `\t` means one, as Kafka's users write it.
    return text.replace("\\t", "\t").replace("\\n", "\n").encode()


@dataclass(frozen=True)
class RecordFormat:
    """What a consumed record's line holds, in Kafka's default formatter's order."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    def with_properties(self, properties: Iterable[tuple[str, str]]) -> RecordFormat:
        """This format with the --property items applied; PropertyError names a bad one."""
        changes: dict[str, object] = {}
        for name, text in properties:
            if name in PRINT_FLAGS:
                changes[name.replace(".", "_")] = _flag(name, text)
            elif name in ("key.separator", "headers.separator"):
                changes[name.replace(".", "_")] = _separator(name, text)
            elif name == "null.literal":
                changes["null_literal"] = text.encode()
            else:
                raise PropertyError(
                    f"--property {name}: unknown to samsa consume (it knows print.timestamp, "
                    "print.partition, print.offset, print.headers, print.key, print.value, "
                    "key.separator, headers.separator, null.literal)"
                )
        return replace(self, **changes)  # type: ignore[arg-type]

    def render(self, record: Record) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            name = TIMESTAMP_TYPE_NAMES[record.timestamp_type]
            fields.append(b"%s:%d" % (name, record.timestamp))
        if self.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            fields.append(self._headers(record.headers))
        if self.print_key:
            fields.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            fields.append(self.null_literal if record.value is None else record.value)
        return self.key_separator.join(fields)

    def _headers(self, headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
        if not headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(
            key.encode() + b":" + (self.null_literal if value is None else value)
            for key, value in headers
        )


# `--format value` and `--format kv` as they always printed (a null key or value as nothing).
VALUE_FORMAT = RecordFormat(null_literal=b"")
KEY_VALUE_FORMAT = RecordFormat(print_key=True, null_literal=b"")
# With --property, Kafka's defaults: a null prints as `null`.
KAFKA_FORMAT = RecordFormat()


@dataclass(frozen=True)
class LineFormat:
    """How `samsa produce` splits a line into key and value."""

    key_separator: bytes | None = None  # None: the whole line is the value, the key null

    @classmethod
    def from_properties(
        cls, key_separator: str | None, properties: Iterable[tuple[str, str]]
    ) -> LineFormat:
        parse_key = key_separator is not None
        if key_separator == "":
            raise PropertyError("--key-separator is empty: give at least one character")
        separator = b"\t" if key_separator is None else key_separator.encode()
        for name, text in properties:
            if name == "parse.key":
                parse_key = _flag(name, text)
            elif name == "key.separator":
                separator = _separator(name, text)
            else:
                raise PropertyError(
                    f"--property {name}: unknown to samsa produce (it knows parse.key and "
                    "key.separator; producer settings go in --producer-property)"
                )
        return cls(separator if parse_key else None)

    def split(self, line: bytes) -> tuple[bytes | None, bytes]:
        """(key, value) of one line, its line ending already removed."""
        if self.key_separator is None or self.key_separator not in line:
            return None, line
        key, value = line.split(self.key_separator, 1)
        return key, value

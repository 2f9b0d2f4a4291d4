"""Goal: one table of error codes for the whole system. samsa.common.errors.ErrorCode and the wire
enum samsa.v1.ErrorCode (proto/samsa/v1/errors.proto) hold the same Kafka names and numbers, the
proto's doc comments call retriable exactly the codes in samsa.common.errors.RETRIABLE, and each
SamsaError subclass carries the code its docstring promises.

Method: walk both enums in both directions (NONE is ERROR_CODE_UNSPECIFIED, every other NAME is
ERROR_CODE_NAME, numbers equal); read errors.proto as text, gather the `//` comment block above
each enum value and require exactly one "Retriable: yes" or "Retriable: no" in it, agreeing with
RETRIABLE; then check the exception classes against a table, so that a new subclass must be
added here with its code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from samsa.common import errors
from samsa.common.errors import RETRIABLE, ErrorCode, SamsaError, is_retriable
from samsa.v1 import errors_pb2

ERRORS_PROTO = Path(__file__).resolve().parents[2] / "proto" / "samsa" / "v1" / "errors.proto"
PROTO_ENUM = errors_pb2.DESCRIPTOR.enum_types_by_name["ErrorCode"]


def proto_name(code: ErrorCode) -> str:
    # buf's STANDARD lint wants the zero value to end in _UNSPECIFIED; it means Kafka's NONE.
    return "ERROR_CODE_UNSPECIFIED" if code is ErrorCode.NONE else f"ERROR_CODE_{code.name}"


def python_name(proto_value_name: str) -> str:
    assert proto_value_name.startswith("ERROR_CODE_"), proto_value_name
    name = proto_value_name.removeprefix("ERROR_CODE_")
    return "NONE" if name == "UNSPECIFIED" else name


# --- names and numbers ------------------------------------------------------------------------


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda code: code.name)
def test_every_python_code_is_in_the_proto_with_the_same_number(code: ErrorCode) -> None:
    assert proto_name(code) in PROTO_ENUM.values_by_name, f"errors.proto lacks {proto_name(code)}"
    assert errors_pb2.ErrorCode.Value(proto_name(code)) == code.value


def test_every_proto_code_is_in_python_with_the_same_number() -> None:
    for value in PROTO_ENUM.values:
        name = python_name(value.name)
        assert name in ErrorCode.__members__, f"common/errors.py lacks ErrorCode.{name}"
        assert ErrorCode[name].value == value.number, value.name
    assert len(PROTO_ENUM.values) == len(ErrorCode)


def test_kafka_numbers_of_the_codes_clients_branch_on() -> None:
    # A spot check against Kafka's protocol (org.apache.kafka.common.protocol.Errors), so that
    # both enums cannot drift together.
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NONE == 0
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.MESSAGE_TOO_LARGE == 10
    assert ErrorCode.NOT_ENOUGH_REPLICAS == 19
    assert ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert ErrorCode.FENCED_LEADER_EPOCH == 74
    assert ErrorCode.PRODUCER_FENCED == 90


# --- retriable, as documented -----------------------------------------------------------------

VALUE_LINE = re.compile(r"^\s*(ERROR_CODE_\w+)\s*=\s*(-?\d+)\s*;")
RETRIABLE_MARK = re.compile(r"Retriable: (yes|no)\b")


def documented_retriable() -> dict[str, list[str]]:
    """Each ErrorCode value of errors.proto -> the "Retriable: yes/no" marks of its comment."""
    marks: dict[str, list[str]] = {}
    comment: list[str] = []
    for line in ERRORS_PROTO.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            comment.append(stripped)
            continue
        match = VALUE_LINE.match(line)
        if match:
            marks[match.group(1)] = RETRIABLE_MARK.findall(" ".join(comment))
        comment = []  # a blank line or any declaration ends a comment block
    return marks


def test_the_proto_text_lists_every_value() -> None:
    # Guards the parser below: it must see each value of the compiled enum.
    assert set(documented_retriable()) == set(PROTO_ENUM.values_by_name)


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda code: code.name)
def test_each_code_is_documented_retriable_as_in_common_errors(code: ErrorCode) -> None:
    marks = documented_retriable()[proto_name(code)]
    assert len(marks) == 1, f"{proto_name(code)} must say 'Retriable: yes' or 'no' once: {marks}"
    expected = "yes" if code in RETRIABLE else "no"
    assert marks[0] == expected, (
        f"errors.proto documents {proto_name(code)} as 'Retriable: {marks[0]}', "
        f"but common/errors.py RETRIABLE says {expected}"
    )


def test_retriable_flags() -> None:
    assert ErrorCode.NONE not in RETRIABLE
    assert ErrorCode.UNKNOWN_SERVER_ERROR not in RETRIABLE
    for code in ErrorCode:
        assert is_retriable(code) == (code in RETRIABLE)


# --- exceptions -------------------------------------------------------------------------------

EXCEPTION_CODES: dict[type[SamsaError], ErrorCode] = {
    errors.CorruptRecordError: ErrorCode.CORRUPT_MESSAGE,
    errors.RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
    errors.InvalidRecordError: ErrorCode.INVALID_RECORD,
    errors.InvalidTimestampError: ErrorCode.INVALID_TIMESTAMP,
    errors.UnsupportedFormatError: ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    errors.UnsupportedCompressionError: ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    errors.OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
    errors.InvalidConfigError: ErrorCode.INVALID_CONFIG,
    errors.StorageError: ErrorCode.KAFKA_STORAGE_ERROR,
}


def subclasses(cls: type[SamsaError]) -> set[type[SamsaError]]:
    direct = set(cls.__subclasses__())
    return direct.union(*(subclasses(sub) for sub in direct))


def test_the_table_covers_every_exception_of_common_errors() -> None:
    defined_here = {cls for cls in subclasses(SamsaError) if cls.__module__ == errors.__name__}
    assert defined_here == set(EXCEPTION_CODES)


@pytest.mark.parametrize(
    ("cls", "code"), list(EXCEPTION_CODES.items()), ids=[cls.__name__ for cls in EXCEPTION_CODES]
)
def test_each_exception_carries_its_code(cls: type[SamsaError], code: ErrorCode) -> None:
    error = cls("what to fix")
    assert error.code is code
    assert error.message == "what to fix"
    assert error.retriable == (code in RETRIABLE)
    assert isinstance(error, SamsaError)


def test_the_base_error_is_an_unknown_server_error_unless_told() -> None:
    assert SamsaError("boom").code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert not SamsaError("boom").retriable
    told = SamsaError("not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert told.code is ErrorCode.NOT_LEADER_OR_FOLLOWER and told.retriable
    # An explicit code on an instance does not leak into its class.
    assert errors.StorageError("disk", ErrorCode.REQUEST_TIMED_OUT).code is not (
        errors.StorageError.code
    )
    assert errors.StorageError.code is ErrorCode.KAFKA_STORAGE_ERROR

"""Goal: request_shape's count is the count protobuf's own parser builds, for every message type
in proto/samsa/v1, and nothing the parser takes gets past it: two bytes of a group (an unknown
field the parser keeps as bytes) in front of 80 MiB of empty entries let the whole request
through uncounted, and empty strings of a `repeated string` (~45 bytes each once parsed) were not
counted at all.

Method: random valid messages of every type (hypothesis, built from the descriptors) serialized
and parsed back; the count taken from the parsed message must be exactly where elements_problem
starts refusing (ELEMENTS_MAX set to it and one less). Random mutations and truncations of them:
whatever the parser takes must be counted the same, and elements_problem only ever answers a
string or None. Crafted groups, nested and unknown, and packed fixed-width scalars.
"""

from __future__ import annotations

import importlib
import pkgutil
import time

import pytest
from google.protobuf import descriptor as d
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa import v1
from samsa.services.runtime import request_shape
from samsa.services.runtime.request_shape import ELEMENTS_MAX, elements_problem
from samsa.v1 import broker_pb2

_F = d.FieldDescriptor
# Every generated module of proto/samsa/v1, found rather than listed: a new .proto is walked too.
_MODULES = [
    importlib.import_module(f"samsa.v1.{name}")
    for _, name, _ in pkgutil.iter_modules(v1.__path__)
    if name.endswith("_pb2")
]


def _all_types() -> list[d.Descriptor]:
    found: list[d.Descriptor] = []

    def add(descriptor: d.Descriptor) -> None:
        if not descriptor.GetOptions().map_entry:
            found.append(descriptor)
        for nested in descriptor.nested_types:
            add(nested)

    for module in _MODULES:
        for descriptor in module.DESCRIPTOR.message_types_by_name.values():
            add(descriptor)
    return found


_TYPES = _all_types()
_INTS = {
    _F.TYPE_INT32: (-(2**31), 2**31 - 1),
    _F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    _F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    _F.TYPE_UINT32: (0, 2**32 - 1),
    _F.TYPE_FIXED32: (0, 2**32 - 1),
    _F.TYPE_INT64: (-(2**63), 2**63 - 1),
    _F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    _F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    _F.TYPE_UINT64: (0, 2**64 - 1),
    _F.TYPE_FIXED64: (0, 2**64 - 1),
}


def _scalar(draw: st.DrawFn, field: d.FieldDescriptor) -> object:
    if field.type in _INTS:
        low, high = _INTS[field.type]
        return draw(st.integers(low, high))
    if field.type == _F.TYPE_BOOL:
        return draw(st.booleans())
    if field.type in (_F.TYPE_FLOAT, _F.TYPE_DOUBLE):
        return draw(st.floats(allow_nan=False, width=32))
    if field.type == _F.TYPE_ENUM:
        return draw(st.sampled_from([v.number for v in field.enum_type.values]))
    if field.type == _F.TYPE_STRING:
        return draw(st.text(max_size=4))
    return draw(st.binary(max_size=4))


def _fill(draw: st.DrawFn, message: Message, depth: int) -> None:
    for field in message.DESCRIPTOR.fields:
        if not draw(st.booleans()):
            continue
        target = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field, value_field = field.message_type.fields
            for _ in range(draw(st.integers(0, 3))):
                key = _scalar(draw, key_field)
                if value_field.message_type is not None:
                    if depth < 4:
                        _fill(draw, target[key], depth + 1)
                else:
                    target[key] = _scalar(draw, value_field)
        elif field.message_type is not None:
            if depth >= 4:
                continue
            if field.is_repeated:
                for _ in range(draw(st.integers(0, 3))):
                    _fill(draw, target.add(), depth + 1)
            else:
                _fill(draw, target, depth + 1)
                target.SetInParent()
        elif field.is_repeated:
            target.extend(_scalar(draw, field) for _ in range(draw(st.integers(0, 5))))
        else:
            setattr(message, field.name, _scalar(draw, field))


@st.composite
def _messages(draw: st.DrawFn) -> tuple[d.Descriptor, bytes]:
    descriptor = draw(st.sampled_from(_TYPES))
    message = GetMessageClass(descriptor)()
    _fill(draw, message, 0)
    return descriptor, message.SerializeToString()


def _parsed_count(message: Message) -> int:
    """Embedded messages and repeated elements of a parsed message, from the parsed objects."""
    count = 0
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key in value:
                count += 1
                if value_field.message_type is not None:
                    count += 1 + _parsed_count(value[key])
        elif field.message_type is not None:
            for item in value if field.is_repeated else [value]:
                count += 1 + _parsed_count(item)
        elif field.is_repeated:
            count += len(value)
    return count


def _refuses_at(monkeypatch: pytest.MonkeyPatch, descriptor: d.Descriptor, raw: bytes) -> bool:
    """Whether elements_problem refuses `raw` with ELEMENTS_MAX at the parsed count minus one,
    and passes it at the count."""
    try:
        message = GetMessageClass(descriptor).FromString(raw)
    except DecodeError:
        for limit in (0, 1, 3):  # whatever it answers, it answers (no other exception)
            monkeypatch.setattr(request_shape, "ELEMENTS_MAX", limit)
            assert isinstance(elements_problem(descriptor, raw), (str, type(None)))
        return True
    count = _parsed_count(message)
    monkeypatch.setattr(request_shape, "ELEMENTS_MAX", count)
    assert elements_problem(descriptor, raw) is None, f"{descriptor.full_name}: {count}"
    if count:
        monkeypatch.setattr(request_shape, "ELEMENTS_MAX", count - 1)
        assert elements_problem(descriptor, raw) is not None, f"{descriptor.full_name}: {count}"
    return True


_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None
)


@_SETTINGS
@given(_messages())
def test_the_count_is_the_parsers_for_every_message_type(monkeypatch, case) -> None:
    descriptor, raw = case
    assert _refuses_at(monkeypatch, descriptor, raw)


@_SETTINGS
@given(_messages(), st.data())
def test_mutated_and_truncated_bytes_are_counted_or_refused_by_the_parser(
    monkeypatch, case, data
) -> None:
    descriptor, raw = case
    mutated = bytearray(raw)
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, len(mutated)))
        chunk = data.draw(st.binary(min_size=1, max_size=3))
        if data.draw(st.booleans()) and at < len(mutated):
            mutated[at : at + len(chunk)] = chunk
        else:
            mutated[at:at] = chunk
    cut = data.draw(st.integers(0, len(mutated)))
    assert _refuses_at(monkeypatch, descriptor, bytes(mutated[:cut]))


def _topics_entry() -> bytes:
    number = broker_pb2.FetchRequest.DESCRIPTOR.fields_by_name["topics"].number
    return bytes([(number << 3) | 2, 0])


def test_a_group_in_front_does_not_let_empty_entries_through() -> None:
    """The parser keeps a group as an unknown field; the walker gave up on it and so let the
    request through uncounted (80 MiB of entries behind two bytes parsed into ~2 GB)."""
    topics = broker_pb2.FetchRequest.DESCRIPTOR.fields_by_name["topics"].number
    entries = _topics_entry() * (ELEMENTS_MAX + 1)
    for group in (
        bytes([(15 << 3) | 3, (15 << 3) | 4]),  # unknown field
        bytes([(topics << 3) | 3, (topics << 3) | 4]),  # a known field, as a group
        bytes([(15 << 3) | 3, (14 << 3) | 3, 8, 1, (14 << 3) | 4, (15 << 3) | 4]),  # nested
    ):
        raw = group + entries
        assert len(broker_pb2.FetchRequest.FromString(raw).topics) == ELEMENTS_MAX + 1
        assert elements_problem(broker_pb2.FetchRequest.DESCRIPTOR, raw) is not None


def test_groups_the_parser_refuses_are_left_to_it() -> None:
    entries = _topics_entry() * (ELEMENTS_MAX + 1)
    for broken in (
        bytes([(15 << 3) | 3]),  # never ends
        bytes([(15 << 3) | 3, (14 << 3) | 4]),  # ends another
        bytes([(15 << 3) | 4]),  # ends none
        bytes([(15 << 3) | 3]) * 101 + bytes([(15 << 3) | 4]) * 101,  # deeper than protobuf's
    ):
        with pytest.raises(DecodeError):
            broker_pb2.FetchRequest.FromString(broken + entries)
    deep = bytes([(15 << 3) | 3]) * 100 + bytes([(15 << 3) | 4]) * 100  # the parser's limit
    assert len(broker_pb2.FetchRequest.FromString(deep + entries).topics) == ELEMENTS_MAX + 1
    assert elements_problem(broker_pb2.FetchRequest.DESCRIPTOR, deep + entries) is not None


def test_packed_scalars_are_counted_exactly() -> None:
    """A packed run is counted by its elements, not its bytes: 200,000 producer id filters of
    eight bytes each are 200,000 elements, within the bound."""
    owner = next(m for m in _TYPES if "producer_id_filters" in m.fields_by_name)
    message = GetMessageClass(owner)()
    message.producer_id_filters.extend([2**55 + i for i in range(200_000)])
    raw = message.SerializeToString()
    assert len(raw) > ELEMENTS_MAX
    assert elements_problem(owner, raw) is None


def test_fields_that_count_nothing_are_bounded_too() -> None:
    """Unknown fields and a singular field sent again and again parse into nothing, but each
    cost the walker (Python, on the event loop) a step: 80 MiB of them held it ~10 s."""
    fields = request_shape.STEPS_MAX + ELEMENTS_MAX // 2 + 1  # the last 1 MB is not walked
    for raw in (b"\x78\x00" * fields, b"\x18\x01" * fields):  # unknown 15; timeout_ms
        started = time.perf_counter()
        assert elements_problem(broker_pb2.ProduceRequest.DESCRIPTOR, raw) is not None
        assert time.perf_counter() - started < 5
    inside_a_group = b"\x7b" + b"\x78\x00" * fields + b"\x7c"
    assert elements_problem(broker_pb2.ProduceRequest.DESCRIPTOR, inside_a_group) is not None
    # Under 8 MB the fields cannot pass the bound: not walked past the count's own bound.
    assert elements_problem(broker_pb2.ProduceRequest.DESCRIPTOR, b"\x78\x00" * 3_999_999) is None


def test_a_table_is_published_only_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers on other threads' loops share the tables: one seen half built (empty) while
    another thread built it would have let that request through uncounted."""
    monkeypatch.setattr(request_shape, "_TABLES", {})
    seen_while_building: list[bool] = []
    counts_inside = request_shape._counts_inside

    def watching(descriptor: d.Descriptor) -> bool:
        seen_while_building.append(broker_pb2.ProduceRequest.DESCRIPTOR in request_shape._TABLES)
        return counts_inside(descriptor)

    monkeypatch.setattr(request_shape, "_counts_inside", watching)
    request_shape._table(broker_pb2.ProduceRequest.DESCRIPTOR)
    assert seen_while_building and not any(seen_while_building)
    assert request_shape._TABLES[broker_pb2.ProduceRequest.DESCRIPTOR]

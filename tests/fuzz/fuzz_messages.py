"""Well-formed requests with absurd values, built from a method's descriptor (the fuzzer's
strategy (b) in test_rpc_fuzz.py): each field set or not, integers at their type's edges and
around zero, unknown enum numbers, names from a pool of awkward ones, record bytes random or
mutated, and once per request a repeated field of HUGE_REPEAT entries. `tame` keeps what such a
request may legitimately do small (see test_rpc_fuzz.py's docstring)."""

from __future__ import annotations

from fuzz_inputs import ABSURD_INTS, random_or_mutated
from google.protobuf import descriptor as d
from google.protobuf import message_factory
from hypothesis import strategies as st

from samsa.common import limits
from samsa.common.record.codec import build_batch

KNOWN, TARGET = "fz-known", "fz-target"
NAMES = [KNOWN, TARGET, "fz-a", "fz-b", "", "x" * 300, "bad/name", ".", "..", "\u00e9t\u00e9\x00"]

_INT_RANGES = {
    d.FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    d.FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    d.FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    d.FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
HUGE_REPEAT = 10_001
RECORDS = [build_batch([b"fz"]), build_batch([b"a", b"b"], keys=[b"k", None], base_offset=5)]
STRINGS = st.sampled_from(NAMES) | st.text(max_size=8)


def _scalar(field: d.FieldDescriptor) -> st.SearchStrategy[object]:
    if field.type in _INT_RANGES:
        low, high = _INT_RANGES[field.type]
        edges = sorted({low, high} | {n for n in ABSURD_INTS if low <= n <= high})
        return st.sampled_from(edges) | st.integers(-3, 100).filter(lambda n: n >= low)
    if field.type == d.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == d.FieldDescriptor.TYPE_ENUM:
        known = [value.number for value in field.enum_type.values]
        return st.sampled_from(known) | st.sampled_from([-1, 99, 2**31 - 1])
    if field.type == d.FieldDescriptor.TYPE_STRING:
        return STRINGS
    if field.type == d.FieldDescriptor.TYPE_BYTES:
        return random_or_mutated(RECORDS) | st.sampled_from([b"", b"\x00" * 16])
    if field.type in (d.FieldDescriptor.TYPE_DOUBLE, d.FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, width=32)
    raise AssertionError(f"no strategy for {field.full_name}")


@st.composite
def messages(draw: st.DrawFn, descriptor: d.Descriptor, depth: int = 0, huge: list | None = None):
    """A message of `descriptor` with each field set or not, to absurd values; at most one
    repeated field per request gets HUGE_REPEAT entries (`huge` is that once-only budget)."""
    huge = [True] if huge is None else huge
    message = message_factory.GetMessageClass(descriptor)()
    if not descriptor.fields:  # DescribeClusterRequest: still a draw, for hypothesis
        return draw(st.just(message))
    for field in descriptor.fields:
        if not draw(st.booleans()):
            continue
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if field.is_repeated:
            count = draw(st.integers(0, 3))
            if huge[0] and depth <= 1 and not is_map and draw(st.integers(0, 30)) == 0:
                huge[0], count = False, HUGE_REPEAT
            if count == 0:
                continue
            target = getattr(message, field.name)
            if is_map:
                key_field, value_field = field.message_type.fields
                for _ in range(count):
                    key = draw(_scalar(key_field))
                    if value_field.message_type is not None:
                        target[key].CopyFrom(
                            draw(messages(value_field.message_type, depth + 1, huge))
                        )
                    else:
                        target[key] = draw(_scalar(value_field))
            elif field.message_type is not None:
                if depth >= 3:
                    continue
                first = draw(messages(field.message_type, depth + 1, huge))
                if count == HUGE_REPEAT:
                    target.extend([first] * count)
                else:
                    rest = range(count - 1)
                    target.extend(
                        [first]
                        + [draw(messages(field.message_type, depth + 1, huge)) for _ in rest]
                    )
            elif count == HUGE_REPEAT:
                target.extend([draw(_scalar(field))] * count)
            else:
                target.extend([draw(_scalar(field)) for _ in range(count)])
        elif field.message_type is not None:
            if depth < 3:
                getattr(message, field.name).CopyFrom(
                    draw(messages(field.message_type, depth + 1, huge))
                )
        else:
            setattr(message, field.name, draw(_scalar(field)))
    return message


def tame(method: d.MethodDescriptor, message) -> None:  # type: ignore[no-untyped-def]
    """Keep what a well-formed request may legitimately do small (see the module docstring)."""
    if method.name in ("CreateTopics", "CreatePartitions"):
        for topic in message.topics:
            field = "num_partitions" if method.name == "CreateTopics" else "count"
            if 64 < getattr(topic, field) <= limits.topic_partitions_max:
                setattr(topic, field, 64)
            if topic.name not in NAMES:
                topic.name = "fz-a"
    if method.name == "CreateTopics":
        for topic in message.topics:
            for key in [k for k in topic.configs if "retention" in k or "cleanup" in k]:
                del topic.configs[key]


def requests(method: d.MethodDescriptor) -> st.SearchStrategy[object]:
    """Well-formed requests for `method` (the stream's items for a streaming method)."""

    def tamed(message):  # type: ignore[no-untyped-def]
        if method.name == "ProduceStream":
            tame(method, message.request)
        else:
            tame(method, message)
        return message

    return messages(method.input_type).map(tamed)

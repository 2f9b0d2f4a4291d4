"""How many objects parsing a request would build, counted on its wire bytes before it is parsed.

Theory of operation. Parsing protobuf builds one object for every embedded message and one
slot for every element of a repeated field, however few bytes the element took on the wire: an
empty `FetchRequest.TopicData` is two bytes and some 50 bytes of memory once parsed, an empty
string of a `repeated string` as much. So one request of gRPC's maximum
(`limits.grpc_message_bytes_max`, 80 MiB) made of empty entries parsed into about 2 GB, on any
service, from anyone who could reach the port, before a handler could count anything (the
handlers' limits on partitions and items come after parsing). The RPC guard (server.py)
therefore asks `elements_problem` first, for every request larger than `ELEMENTS_MAX` bytes (a
smaller one cannot hold more elements than that: every element counted below owns at least one
byte of its own, its tag or, packed, its last byte): it walks the wire format along the
message's descriptor, counting embedded messages and repeated elements (packed ones exactly:
varints by their last bytes, fixed-width ones by their width), and stops as soon as the count
passes `ELEMENTS_MAX`, or as soon as the bytes left could not take it past (so a large request
is walked at most until its last million bytes). Fields that count nothing (unknown ones, a
singular field sent again and again) cost a walk too, so the fields walked are bounded as well
(`STEPS_MAX`): at most ~1 s of the event loop for the worst request.

Which length-delimited fields are messages comes from the descriptor only: `bytes` and `string`
fields (record batches) are skipped by their length, never looked into. A message type that can
hold nothing counted (no repeated field, no message field, like `RecordHeader`) is skipped by its
length too, counted as one.

Groups (wire types 3 and 4) are not in proto3 but the parser takes them as unknown fields, kept
as bytes: they are skipped to their matching end, counting nothing; a walker that gave up on them
let two bytes in front of 80 MiB of empty entries through. Unknown fields of the other wire types
are skipped too. Anything else the walker cannot walk (a truncated field, a varint over 10
bytes, wire types 6 and 7, nesting deeper than protobuf's own limit of 100) the parser refuses
too, so it is left to the parser (INVALID_ARGUMENT); the elements counted before that point are
within the bound.

Pure: no I/O.
"""

from __future__ import annotations

from google.protobuf import descriptor as d

# At most this many parsed elements per request: ~55 MB of objects at worst, and a fraction of a
# second to count. Far above what any legitimate request carries (a Fetch of
# limits.request_partitions_max partitions is ~20,000; records travel as bytes).
ELEMENTS_MAX = 1_000_000
# At most this many fields walked per request, counted or not: the walk is Python, on the event
# loop, ~0.25 us a field, and fields that count nothing (unknown ones, a singular field sent again
# and again: both parse into nothing) were walked without bound, 80 MiB of two-byte ones for ~10 s.
# A legitimate request walks at most a few fields per element (a typed Record: itself, offset,
# timestamp, key, value); every field takes two bytes or more, so a request under 8 MB never gets
# here.
STEPS_MAX = 4 * ELEMENTS_MAX
# Above protobuf's own recursion limit (100, messages and groups alike), so the walker never
# gives up on a request the parser would take.
_DEPTH_MAX = 128

_F = d.FieldDescriptor
_FIXED_WIDTH = {
    _F.TYPE_FIXED32: 4,
    _F.TYPE_SFIXED32: 4,
    _F.TYPE_FLOAT: 4,
    _F.TYPE_FIXED64: 8,
    _F.TYPE_SFIXED64: 8,
    _F.TYPE_DOUBLE: 8,
}
_SCALAR_WIRE_TYPE = {4: 5, 8: 1}  # fixed width -> wire type; varints are 0
_CONTINUED = bytes(range(0x80, 0x100))  # a packed varint's bytes but its last

# Actions, by tag (field number and wire type).
_ONE = 0  # an element: count 1, skip it
_MESSAGE = 1  # an embedded message: count 1, walk it
_PACKED_VARINTS = 2
_PACKED_4 = 3
_PACKED_8 = 4


class _TooMany(Exception):
    pass


class _Enough(Exception):
    """The bytes left cannot take the count past ELEMENTS_MAX."""


class _Unwalkable(Exception):
    pass


_Table = dict[int, tuple[int, "_Table | None"]]
_TABLES: dict[d.Descriptor, _Table] = {}
_COUNTS_INSIDE: dict[d.Descriptor, bool] = {}


def _counts_inside(descriptor: d.Descriptor) -> bool:
    """Whether a `descriptor` message can hold anything counted (a repeated or message field)."""
    known = _COUNTS_INSIDE.get(descriptor)
    if known is None:
        known = any(f.is_repeated or f.message_type is not None for f in descriptor.fields)
        _COUNTS_INSIDE[descriptor] = known
    return known


def _table(descriptor: d.Descriptor) -> _Table:
    """What to do for each tag of a `descriptor` message that counts; other tags are skipped.
    Built once per type; published only whole (servers on other threads' loops may ask)."""
    table = _TABLES.get(descriptor)
    if table is None:
        building: dict[d.Descriptor, _Table] = {}
        table = _build(descriptor, building)
        _TABLES.update(building)
    return table


def _build(descriptor: d.Descriptor, building: dict[d.Descriptor, _Table]) -> _Table:
    for known in (_TABLES, building):
        if descriptor in known:
            return known[descriptor]
    table = building[descriptor] = {}  # before the fields: a message type may hold itself
    for field in descriptor.fields:
        by_length = field.number << 3 | 2
        if field.message_type is not None:
            if _counts_inside(field.message_type):
                table[by_length] = (_MESSAGE, _build(field.message_type, building))
            else:
                table[by_length] = (_ONE, None)
        elif field.is_repeated:
            if field.type in (_F.TYPE_BYTES, _F.TYPE_STRING):
                table[by_length] = (_ONE, None)
                continue
            width = _FIXED_WIDTH.get(field.type)
            packed = {None: _PACKED_VARINTS, 4: _PACKED_4, 8: _PACKED_8}[width]
            table[by_length] = (packed, None)
            table[field.number << 3 | _SCALAR_WIRE_TYPE.get(width or 0, 0)] = (_ONE, None)
    return table


def _varint(raw: bytes, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while at < end:
        byte = raw[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            break
    raise _Unwalkable


def _walk(
    table: _Table, raw: bytes, at: int, end: int, count: int, steps: int, depth: int
) -> tuple[int, int]:
    """`count` plus the elements of the message in raw[at:end], and `steps` plus the fields
    walked; _TooMany past ELEMENTS_MAX or STEPS_MAX, _Enough once the rest of `raw` cannot take
    the count past."""
    if depth > _DEPTH_MAX:
        raise _Unwalkable
    total = len(raw)
    while at < end:
        if count + (total - at) <= ELEMENTS_MAX:
            raise _Enough  # and not walking the rest costs nothing
        steps += 1
        if steps > STEPS_MAX:
            raise _TooMany
        tag = raw[at]
        if tag < 0x80:
            at += 1
        else:
            tag, at = _varint(raw, at, end)
        wire_type = tag & 7
        if wire_type == 2:
            if at < end and raw[at] < 0x80:
                length = raw[at]
                at += 1
            else:
                length, at = _varint(raw, at, end)
            start, at = at, at + length
            if at > end:
                raise _Unwalkable
        elif wire_type == 0:
            if at < end and raw[at] < 0x80:
                at += 1
            else:
                _, at = _varint(raw, at, end)
        elif wire_type == 1:
            at += 8
        elif wire_type == 5:
            at += 4
        elif wire_type == 3:
            at, steps = _skip_group(raw, at, end, tag >> 3, steps, depth + 1)
        else:
            raise _Unwalkable  # an end group outside its group, wire types 6 and 7
        action = table.get(tag)
        if action is None:
            continue
        kind, inner = action
        if kind == _ONE:
            count += 1
        elif kind == _MESSAGE:
            count, steps = _walk(inner, raw, start, at, count + 1, steps, depth + 1)  # type: ignore[arg-type]
        elif kind == _PACKED_VARINTS:
            count += len(raw[start:at].translate(None, _CONTINUED))
        else:
            count += (at - start) // (4 if kind == _PACKED_4 else 8)
        if count > ELEMENTS_MAX:
            raise _TooMany
    if at > end:
        raise _Unwalkable
    return count, steps


def _skip_group(
    raw: bytes, at: int, end: int, number: int, steps: int, depth: int
) -> tuple[int, int]:
    """Where the group `number` opened just before raw[at] ends (after its end tag), and
    `steps` plus the fields in it; _TooMany past STEPS_MAX."""
    numbers = [number]
    while at < end:
        if depth + len(numbers) - 1 > _DEPTH_MAX:
            raise _Unwalkable
        steps += 1
        if steps > STEPS_MAX:
            raise _TooMany
        tag = raw[at]
        if tag < 0x80:
            at += 1
        else:
            tag, at = _varint(raw, at, end)
        wire_type = tag & 7
        if wire_type == 0:
            if at < end and raw[at] < 0x80:
                at += 1
            else:
                _, at = _varint(raw, at, end)
        elif wire_type == 1:
            at += 8
        elif wire_type == 5:
            at += 4
        elif wire_type == 2:
            length, at = _varint(raw, at, end)
            at += length
        elif wire_type == 3:
            numbers.append(tag >> 3)
        elif wire_type == 4 and tag >> 3 == numbers[-1]:
            numbers.pop()
            if not numbers:
                return at, steps
        else:
            raise _Unwalkable
    raise _Unwalkable


def elements_problem(descriptor: d.Descriptor, raw: bytes) -> str | None:
    """Why `raw`, a serialized `descriptor` message, must not be parsed, or None."""
    if len(raw) <= ELEMENTS_MAX:
        return None
    try:
        _walk(_table(descriptor), raw, 0, len(raw), 0, 0, 0)
    except _TooMany:
        return (
            f"the request ({len(raw)} bytes) holds over {ELEMENTS_MAX} repeated elements or "
            f"embedded messages, or over {STEPS_MAX} fields; a request may hold at most "
            f"{ELEMENTS_MAX} and {STEPS_MAX} (split it)"
        )
    except (_Unwalkable, _Enough):
        return None
    return None

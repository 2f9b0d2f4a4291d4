"""How many objects parsing a request would build, counted on its wire bytes before it is parsed.

Theory of operation. Parsing protobuf builds one object for every embedded message and one
slot for every element of a repeated scalar field, however few bytes the element took on the
wire: an empty `FetchRequest.TopicData` is two bytes and some 50 bytes of memory once parsed. So
one request of gRPC's maximum (`limits.grpc_message_bytes_max`, 80 MiB) made of empty entries
parsed into about 2 GB, on any service, from anyone who could reach the port, before a handler
could count anything (the handlers' limits on partitions and items come after parsing). The RPC
guard (server.py) therefore asks `elements_problem` first, for every request larger than
`ELEMENTS_MAX` bytes (a smaller one cannot hold more elements than that): it walks the wire
format along the message's descriptor, counting embedded messages, repeated scalar elements and
the bytes of packed ones (an upper bound of their count), and stops as soon as the count passes
`ELEMENTS_MAX`. So it walks at most that many fields, and a legitimate large request, whose
bytes are records (one `bytes` field, skipped by its length), costs a few steps.

A request it cannot walk (malformed wire format, groups) is left to the parser, which refuses
it; the elements counted before that point are within the bound. Unknown fields are skipped:
the parser keeps them as bytes.

Pure: no I/O.
"""

from __future__ import annotations

from google.protobuf import descriptor as d

# At most this many parsed elements per request: ~55 MB of objects at worst, and a fraction of a
# second to count. Far above what any legitimate request carries (a Fetch of
# limits.request_partitions_max partitions is ~20,000; records travel as bytes).
ELEMENTS_MAX = 1_000_000
_DEPTH_MAX = 100  # protobuf's own recursion limit

_LEN = 2


class _TooMany(Exception):
    pass


class _Unwalkable(Exception):
    pass


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


def _walk(descriptor: d.Descriptor, raw: bytes, at: int, end: int, count: int, depth: int) -> int:
    """`count` plus the elements of the message in raw[at:end]; _TooMany past ELEMENTS_MAX."""
    if depth > _DEPTH_MAX:
        raise _Unwalkable
    fields = descriptor.fields_by_number
    while at < end:
        tag, at = _varint(raw, at, end)
        wire_type = tag & 7
        field = fields.get(tag >> 3)
        if wire_type == 0:
            _, at = _varint(raw, at, end)
        elif wire_type == 1:
            at += 8
        elif wire_type == 5:
            at += 4
        elif wire_type == _LEN:
            length, at = _varint(raw, at, end)
            if at + length > end:
                raise _Unwalkable
            if field is not None:
                if field.message_type is not None:
                    count = _walk(field.message_type, raw, at, at + length, count + 1, depth + 1)
                elif _is_repeated(field) and field.type not in _BYTES_TYPES:
                    count += length  # packed: at most one element per byte
            at += length
        else:
            raise _Unwalkable  # groups (3, 4) or not protobuf: the parser decides
        if field is not None and wire_type != _LEN and _is_repeated(field):
            count += 1
        if count > ELEMENTS_MAX:
            raise _TooMany
    if at > end:
        raise _Unwalkable
    return count


_BYTES_TYPES = (d.FieldDescriptor.TYPE_BYTES, d.FieldDescriptor.TYPE_STRING)


def _is_repeated(field: d.FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def elements_problem(descriptor: d.Descriptor, raw: bytes) -> str | None:
    """Why `raw`, a serialized `descriptor` message, must not be parsed, or None."""
    if len(raw) <= ELEMENTS_MAX:
        return None
    try:
        _walk(descriptor, raw, 0, len(raw), 0, 0)
    except _TooMany:
        return (
            f"the request ({len(raw)} bytes) holds over {ELEMENTS_MAX} repeated elements or "
            f"embedded messages; a request may hold at most {ELEMENTS_MAX} (split it)"
        )
    except _Unwalkable:
        return None
    return None

"""Protobuf's wire format, for the messages that are laid out by hand so that large `bytes`
fields (record batches) are copied once, into the message's bytes, rather than into a message
object, a copy of it, and its serialization: the client's ProduceStream messages
(samsa_client/produce_message.py) and the broker's fetch answers (services/broker/requests/
fetch_wire.py). Pure."""

from __future__ import annotations


def varint(value: int) -> bytes:
    """A protobuf varint; a negative int32/int64 is its 64-bit two's complement (10 bytes)."""
    if value < 0:
        value += 1 << 64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field_number: int, wire_type: int) -> bytes:
    """A field's key: (number << 3) | wire type (0 varint, 2 length-delimited)."""
    return varint(field_number << 3 | wire_type)


VARINT = 0
LENGTH_DELIMITED = 2

"""Protobuf wire bytes built by hand, for tests that send what no generated message would
(millions of empty entries, fields in groups): request_shape's and the RPC guard's tests."""

from __future__ import annotations


def varint(value: int) -> bytes:
    """`value` (>= 0) as a protobuf base-128 varint."""
    assert value >= 0
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    """Field `number` holding `payload` (wire type 2: a message, bytes or a packed run)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload

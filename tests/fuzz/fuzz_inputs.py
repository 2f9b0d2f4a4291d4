"""Hypothesis strategies shared by the fuzz tests: random bytes and mutations of valid inputs.

A mutation is what damage and hostile clients do to bytes: flip bits, cut the tail, splice in a
piece of other bytes (or of itself), overwrite a 1/2/4/8-byte field with an absurd integer (0,
-1, the extremes of each width, huge lengths), drop or duplicate a range. Applied one to three at
a time to a valid input, they reach the checks behind the first one (framing, CRC, lengths),
which random bytes alone rarely pass.
"""

from __future__ import annotations

import struct

from hypothesis import strategies as st

ABSURD_INTS = [0, 1, -1, 2**7 - 1, -(2**7), 2**15 - 1, -(2**15), 2**31 - 1, -(2**31), 2**63 - 1]
ABSURD_INTS += [-(2**63), 2**32 - 1, 2**16, 10**9, 61, 49, 12, 0x7F7F7F7F]
_WIDTHS = {1: "<b", 2: "<h", 4: "<i", 8: "<q"}


def _absurd_field(width: int, value: int) -> bytes:
    if width == 1:
        return bytes([value & 0xFF])
    bits = 8 * width
    value = value & ((1 << bits) - 1)  # wrap into the width, as a C cast would
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return struct.pack(_WIDTHS[width], value)


@st.composite
def mutated(draw: st.DrawFn, valid: bytes, donors: st.SearchStrategy[bytes] | None = None) -> bytes:
    """`valid` with one to three mutations."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "splice", "absurd", "drop", "repeat"]))
        size = len(data)
        if kind == "flip" and size:
            position = draw(st.integers(0, size - 1))
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate" and size:
            del data[draw(st.integers(0, size - 1)) :]
        elif kind == "splice":
            source = draw(donors) if donors is not None else draw(st.binary(max_size=64))
            if draw(st.booleans()) and size:
                start = draw(st.integers(0, size - 1))
                source = bytes(data[start : start + draw(st.integers(1, 64))])
            at = draw(st.integers(0, size))
            end = draw(st.integers(at, min(size, at + 64)))
            data[at:end] = source
        elif kind == "absurd" and size:
            width = draw(st.sampled_from([w for w in _WIDTHS if w <= size] or [1]))
            at = draw(st.integers(0, size - width))
            value = draw(st.sampled_from(ABSURD_INTS) | st.integers(-(2**63), 2**64))
            data[at : at + width] = _absurd_field(width, value)
        elif kind == "drop" and size:
            at = draw(st.integers(0, size - 1))
            del data[at : at + draw(st.integers(1, 16))]
        elif kind == "repeat" and size:
            at = draw(st.integers(0, size - 1))
            piece = data[at : at + draw(st.integers(1, 64))]
            data[at:at] = piece
    return bytes(data)


def random_or_mutated(valid: list[bytes]) -> st.SearchStrategy[bytes]:
    """Random bytes, a valid input as it is, or a mutation of one."""
    pick = st.sampled_from(valid)
    return st.one_of(
        st.binary(max_size=256),
        pick,
        pick.flatmap(lambda v: mutated(v)),
        pick.flatmap(lambda v: mutated(v, donors=pick)),
    )

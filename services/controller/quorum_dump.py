"""The controller's metadata snapshot file ("dump"): pysyncobj's full dump, in our own format.

pysyncobj compacts its journal by writing a dump through the serializer hooks quorum.py gives
it; the file holds the two Raft entries pysyncobj needs to resume its journal after the dump,
the peer addresses, and a protobuf MetadataSnapshot, all under one CRC:

  magic "SAMSADMP" | u32 format | entry last | entry previous | u32 n | n x (u32 len, address)
  | u32 len, MetadataSnapshot | u32 crc32 of everything before it

where an entry is u64 raft index, u64 raft term, u32 len, pysyncobj's command bytes. All
integers little-endian. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import struct
import zlib

DUMP_MAGIC = b"SAMSADMP"
DUMP_FORMAT = 1
RaftEntry = tuple[bytes, int, int]


def encode_dump(
    last_entry: RaftEntry, previous_entry: RaftEntry, addresses: list[str], snapshot: bytes
) -> bytes:
    parts = [DUMP_MAGIC, struct.pack("<I", DUMP_FORMAT)]
    for command, index, term in (last_entry, previous_entry):
        command = bytes(command)
        parts.append(struct.pack("<QQI", index, term, len(command)) + command)
    parts.append(struct.pack("<I", len(addresses)))
    for address in addresses:
        encoded = address.encode()
        parts.append(struct.pack("<I", len(encoded)) + encoded)
    parts.append(struct.pack("<I", len(snapshot)) + snapshot)
    body = b"".join(parts)
    return body + struct.pack("<I", zlib.crc32(body))


def decode_dump(data: bytes) -> tuple[RaftEntry, RaftEntry, list[str], bytes]:
    """The parts of a dump file; ValueError when it is truncated, corrupt or not ours."""
    if len(data) < len(DUMP_MAGIC) + 8 or not data.startswith(DUMP_MAGIC):
        raise ValueError("not a Samsa metadata snapshot file")
    body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
    if zlib.crc32(body) != crc:
        raise ValueError("snapshot file checksum mismatch")
    reader = _Reader(body, len(DUMP_MAGIC))
    (format_version,) = reader.unpack("<I")
    if format_version != DUMP_FORMAT:
        raise ValueError(f"snapshot file format {format_version} is not {DUMP_FORMAT}")
    entries = []
    for _ in range(2):
        index, term, size = reader.unpack("<QQI")
        entries.append((reader.take(size), index, term))
    (count,) = reader.unpack("<I")
    addresses = [reader.take(reader.unpack("<I")[0]).decode() for _ in range(count)]
    snapshot = reader.take(reader.unpack("<I")[0])
    if reader.position != len(body):
        raise ValueError("trailing bytes in snapshot file")
    return entries[0], entries[1], addresses, snapshot


class _Reader:
    def __init__(self, data: bytes, position: int) -> None:
        self.data = data
        self.position = position

    def take(self, size: int) -> bytes:
        if self.position + size > len(self.data):
            raise ValueError("snapshot file truncated")
        chunk = self.data[self.position : self.position + size]
        self.position += size
        return chunk

    def unpack(self, layout: str) -> tuple[int, ...]:
        return struct.unpack(layout, self.take(struct.calcsize(layout)))

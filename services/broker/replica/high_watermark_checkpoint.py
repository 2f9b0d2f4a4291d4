"""The high watermarks of every partition in one data directory, as text (Kafka's
replication-offset-checkpoint), encoded and decoded.

Theory of operation. A restarted broker starts each partition from its checkpointed high
watermark (capped at the log end) rather than 0, so consumers need not wait for replication to
move it up again. One file per data directory instead of one per partition means one atomic
write (one fsync of the file, one of the directory) however many partitions moved, and nothing at
all while none did. The format is checkpoint_format.py's: a version line, a count line, then one
"topic partition high_watermark" line per partition, readable with `cat`. Topic names are
[A-Za-z0-9._-] (the controller validates them), so a space cannot occur inside one. Writing the
file atomically is checkpoint_file.py's job; this module only maps entries to bytes and back, and
refuses anything malformed with CorruptCheckpointError — the caller then starts every partition
at 0, which is safe (a high watermark only ever moves up from there).

Invariants: decode(encode(entries)) == entries; entries are sorted on encoding, so equal maps
give equal bytes; every high watermark and partition is a non-negative integer.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.services.broker.log.checkpoint_format import (
    CorruptCheckpointError,
    checkpoint_lines,
    encode_checkpoint_lines,
)

HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"


def encode_high_watermarks(high_watermarks: Mapping[tuple[str, int], int]) -> bytes:
    """The file's bytes for `high_watermarks` by (topic, partition)."""
    lines = []
    for (topic, partition), high_watermark in sorted(high_watermarks.items()):
        assert topic and " " not in topic and "\n" not in topic, f"bad topic name {topic!r}"
        assert partition >= 0 and high_watermark >= 0
        lines.append(f"{topic} {partition} {high_watermark}")
    return encode_checkpoint_lines(lines)


def decode_high_watermarks(data: bytes) -> dict[tuple[str, int], int]:
    """High watermarks by (topic, partition); CorruptCheckpointError for anything malformed."""
    high_watermarks = {}
    for line in checkpoint_lines(data):
        parts = line.split(" ")
        if len(parts) != 3 or not parts[0]:
            raise CorruptCheckpointError(f"entry {line!r} is not 'topic partition high_watermark'")
        key = (parts[0], _natural(parts[1]))
        if key in high_watermarks:
            raise CorruptCheckpointError(f"partition {key} appears twice")
        high_watermarks[key] = _natural(parts[2])
    return high_watermarks


def _natural(text: str) -> int:
    if not text.isdigit():
        raise CorruptCheckpointError(f"checkpoint field {text!r} is not a non-negative integer")
    return int(text)

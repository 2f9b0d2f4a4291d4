"""The text format of checkpoint files (Kafka's CheckpointFile), encoded and decoded.

Theory of operation. A checkpoint is a few lines of ASCII: a format version, an entry count, then
one entry per line as space-separated integers. The leader-epoch checkpoint holds
"leader_epoch start_offset" entries; the recovery-point and log-start-offset checkpoints hold one
entry, the offset. Text keeps them readable with `cat` when an operator debugs a broker, as in
Kafka. Writing them atomically is checkpoint_file.py's job; this module only maps entries to
bytes and back, and refuses anything malformed (a torn or hand-edited file) with
CorruptCheckpointError, so that the caller chooses a safe fallback instead of a wrong value.

Invariants: decode(encode(entries)) == entries; every entry has exactly `fields` integers; the
count line matches the number of entry lines.
"""

from __future__ import annotations

from collections.abc import Sequence

CHECKPOINT_VERSION = 0
# A checkpoint is tiny; anything bigger is not ours (and is not parsed).
CHECKPOINT_BYTES_MAX = 16 * 1024 * 1024


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse: the caller falls back to a safe value."""


def encode_checkpoint(entries: Sequence[Sequence[int]]) -> bytes:
    return encode_checkpoint_lines(
        [" ".join(str(int(field)) for field in entry) for entry in entries]
    )


def encode_checkpoint_lines(entries: Sequence[str]) -> bytes:
    """The version line, the count line, then one line per entry."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def decode_checkpoint(data: bytes, *, fields: int) -> list[tuple[int, ...]]:
    """Entries of `fields` integers each; CorruptCheckpointError for anything malformed."""
    entries = []
    for line in checkpoint_lines(data):
        parts = line.split(" ")
        if len(parts) != fields:
            raise CorruptCheckpointError(f"checkpoint entry {line!r} needs {fields} integers")
        entries.append(tuple(map(_integer, parts)))
    return entries


def checkpoint_lines(data: bytes) -> list[str]:
    """The entry lines of a checkpoint whose framing (size, ASCII, version, count) is right;
    CorruptCheckpointError otherwise. Each checkpoint kind parses its own entries."""
    if len(data) > CHECKPOINT_BYTES_MAX:
        raise CorruptCheckpointError(f"checkpoint of {len(data)} bytes is implausibly large")
    try:
        lines = data.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise CorruptCheckpointError("checkpoint is not ASCII text") from None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"checkpoint has {len(lines)} lines, needs at least 2")
    version, count = _integer(lines[0]), _integer(lines[1])
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"checkpoint version {version} is unknown")
    if count != len(lines) - 2:
        raise CorruptCheckpointError(f"checkpoint declares {count} entries, has {len(lines) - 2}")
    return lines[2:]


def _integer(text: str) -> int:
    if not text or not (text.isdigit() or (text[0] == "-" and text[1:].isdigit())):
        raise CorruptCheckpointError(f"checkpoint field {text!r} is not an integer")
    return int(text)

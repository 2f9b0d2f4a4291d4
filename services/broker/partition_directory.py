"""A partition directory's `topic_id` file (Kafka's partition.metadata, KIP-516): whose log it is.

Theory of operation. The broker names a partition's directory `<topic>-<partition>`, so a topic
deleted while the broker was down and created again under the same name finds the old log
there; the topic id file tells them apart. Before a partition's log is opened
(`prepare_partition_directory`):

- no directory: the log is created;
- the file holds this topic's 16-byte id: the log is opened as it is;
- it holds another 16-byte id: the log of a deleted topic, wiped (Kafka's stray log);
- it is missing, or not 16 bytes (empty, torn, garbled): a creation that crashed before its log
  held a record leaves that, so a directory holding no record is wiped and the log created; one
  that holds records is refused with a StorageError naming the way out, never wiped: whose
  records they are is unknown, and they may be the only copy (Kafka refuses to load a log whose
  partition.metadata it cannot read).

A new log's file is written without an fsync (creating thousands of partitions costs none) and
made durable, with the directory and its entry in the data directory, by the log's first flush,
before any of its records (`Log.sync_before_records`): an OS crash can empty the file only while
no record of the log was flushed. So is the file of a log opened without a record (its creation
may have been followed by a process crash, with the file still only in the page cache).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from samsa.common.errors import StorageError
from samsa.services.broker.log.segment import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX

log = logging.getLogger(__name__)

TOPIC_ID_FILE = "topic_id"
TOPIC_ID_BYTES = 16  # a UUID


def prepare_partition_directory(directory: Path, topic_id: bytes) -> bool:
    """Make `directory` ready for `topic_id`'s log (see the module docstring); True when the log
    is new there (the caller writes the topic id file once the log is open). Raises
    StorageError for a directory holding records under an unreadable topic id."""
    assert len(topic_id) == TOPIC_ID_BYTES, "topic ids are UUIDs"
    if not directory.exists():
        return True
    id_file = directory / TOPIC_ID_FILE
    try:
        found: bytes | None = id_file.read_bytes()
    except FileNotFoundError:
        found = None
    if found == topic_id:
        return False
    if found is not None and len(found) == TOPIC_ID_BYTES:
        log.warning("removing the log of a deleted topic", extra={"dir": str(directory)})
    elif _holds_records(directory):
        state = "missing" if found is None else f"{len(found)} bytes, not {TOPIC_ID_BYTES}"
        raise StorageError(
            f"{directory} holds records but its {TOPIC_ID_FILE} file is {state}: whose "
            f"records they are is unknown, so they are neither opened nor deleted. If they are "
            f"this topic's, write its id ({topic_id.hex()}, 16 raw bytes) into {id_file}; "
            "otherwise move the directory out of the data directory, and the broker creates "
            "the partition again (a follower then fetches it from its leader)"
        )
    else:
        log.warning(
            "removing a partition directory whose creation did not finish",
            extra={"dir": str(directory)},
        )
    shutil.rmtree(directory)
    return True


def write_topic_id(directory: Path, topic_id: bytes) -> None:
    """Write a new log's topic id file, without an fsync (the log's first flush does it)."""
    (directory / TOPIC_ID_FILE).write_bytes(topic_id)


def _holds_records(directory: Path) -> bool:
    """Whether a segment file in `directory` (or an interrupted compaction's) is not empty."""
    return any(
        path.name.endswith((LOG_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)) and path.stat().st_size > 0
        for path in directory.iterdir()
    )

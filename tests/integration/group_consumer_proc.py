"""One consumer-group member as its own process, so that a test can SIGKILL it.

Usage: group_consumer_proc.py BOOTSTRAP GROUP TOPIC JOURNAL STOP_FILE

It subscribes to TOPIC in GROUP with manual commits and appends to JOURNAL, one line per event,
flushed before the next step (a SIGKILL loses at most a line being written, never one before):

    R <topic> <partition> <offset> <value>    a record processed
    C <topic> <partition> <offset>            a commit that succeeded (the next offset to read)
    F <message>                               a commit that failed
    A|V|L <monotonic_ns> <topic>:<p>,...      assigned, revoked, lost (from the listener)

Records of a batch are written and flushed before the batch's offsets are committed, so every
committed offset was processed. When STOP_FILE exists it closes the consumer (a revocation, a
leave) and exits 0. `read_journal` reads a journal back, for the test.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from samsa.client import Consumer, ConsumerRebalanceListener, KafkaError

# Small batches and a short pause after each: a test watching the journals can act midway.
POLL_RECORDS_MAX = 200
BATCH_PAUSE_S = 0.02


class JournalListener(ConsumerRebalanceListener):
    """Logs every assignment change with a monotonic timestamp (one clock for all processes)."""

    def __init__(self, journal: TextIO) -> None:
        self.journal = journal

    def _log(self, kind: str, partitions: list[tuple[str, int]]) -> None:
        listed = ",".join(f"{topic}:{partition}" for topic, partition in partitions)
        self.journal.write(f"{kind} {time.monotonic_ns()} {listed or '-'}\n")
        self.journal.flush()

    def on_partitions_assigned(self, partitions: list[tuple[str, int]]) -> None:
        self._log("A", partitions)

    def on_partitions_revoked(self, partitions: list[tuple[str, int]]) -> None:
        self._log("V", partitions)

    def on_partitions_lost(self, partitions: list[tuple[str, int]]) -> None:
        self._log("L", partitions)


def process_batch(consumer: Consumer, journal: TextIO, records: list) -> None:
    """Write the batch, flush, then commit the next offset of each partition in it."""
    journal.write(
        "".join(f"R {r.topic} {r.partition} {r.offset} {r.value.decode()}\n" for r in records)
    )
    journal.flush()
    offsets: dict[tuple[str, int], int] = {}
    for record in records:
        offsets[(record.topic, record.partition)] = record.offset + 1
    try:
        consumer.commit(offsets)
    except KafkaError as error:  # CommitFailedError among others: journaled, the test fails
        message = f"{type(error).__name__}: {error}".replace("\n", " ")
        journal.write(f"F {message}\n")
    else:
        journal.write("".join(f"C {t} {p} {o}\n" for (t, p), o in sorted(offsets.items())))
    journal.flush()


@dataclass
class Journal:
    """What one member process wrote (complete lines only: a SIGKILL may cut the last one)."""

    records: list[tuple[int, int, int]] = field(default_factory=list)  # partition, offset, id
    committed: dict[int, int] = field(default_factory=dict)  # partition -> last committed
    changes: list[tuple[str, int, list[int]]] = field(default_factory=list)  # kind, ns, parts
    failures: list[str] = field(default_factory=list)

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for kind, _, partitions in self.changes:
            if kind == "A":
                owned |= set(partitions)
            else:
                owned -= set(partitions)
        return owned


def read_journal(path: Path) -> Journal:
    journal = Journal()
    if not path.exists():
        return journal
    text = path.read_text(encoding="utf-8")
    for line in text[: text.rfind("\n") + 1].splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "R":
            _, partition, offset, value = rest.split(" ")
            journal.records.append((int(partition), int(offset), int(value)))
        elif kind == "C":
            _, partition, offset = rest.split(" ")
            journal.committed[int(partition)] = int(offset)
        elif kind in ("A", "V", "L"):
            ns, listed = rest.split(" ")
            parts = [] if listed == "-" else [int(tp.rsplit(":", 1)[1]) for tp in listed.split(",")]
            journal.changes.append((kind, int(ns), parts))
        else:
            assert kind == "F", line
            journal.failures.append(rest)
    return journal


def main(bootstrap: str, group: str, topic: str, journal_path: str, stop_file: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "max.poll.records": POLL_RECORDS_MAX,
        }
    )
    with open(journal_path, "a", encoding="utf-8") as journal:
        consumer.subscribe([topic], listener=JournalListener(journal))
        stop = Path(stop_file)
        while not stop.exists():
            records = consumer.poll(timeout=0.2)
            if records:
                process_batch(consumer, journal, records)
                time.sleep(BATCH_PAUSE_S)
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))

"""One transactional copy-pipeline as its own process, so that a test can kill -9 it.

Usage: txn_pipeline_proc.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID JOURNAL STOP_FILE

The README's consume-transform-produce loop, with the error handling a real pipeline needs: a
read_committed group member polls INPUT (a killed instance's member is removed when its session
expires; its successor joins as a new member); each poll's records are copied to OUTPUT (same
partition, `copied(value)`) and the consumed offsets are committed, all in one transaction. It
pauses `TXN_PAUSE_S` between sending and committing, as real work would, so that a kill lands
mid-transaction most of the time. A transaction that fails is aborted and
the consumer is rewound to the group's committed offsets, so the records are copied again by the
next one; a commit that times out is retried (its outcome is the coordinator's, KIP-890's retry
rule). Fenced (a successor called init_transactions): it exits 3. When STOP_FILE exists it
leaves the group and exits 0.

The JOURNAL gets one line per outcome, flushed: `C <records>` committed, `A <reason>` aborted,
`F <reason>` fenced, `S` started (initialized), `W <records>` a transaction's records written
and not yet committed; while `JOURNAL.hold` exists the pipeline waits right after writing that
line (the test holds it there to kill it mid-transaction, whatever the machine's load). The test
reports the counts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from txn_history_checker import copied

from samsa.client import Consumer, KafkaError, Producer
from samsa.client.transaction_manager import FATAL_ERRORS

CALL_TIMEOUT_S = 30.0
ATTEMPTS = 8  # of a commit or abort that times out, before giving up on this process
TXN_PAUSE_S = 0.2


class Fenced(Exception):
    """Another instance with this transactional.id took over: this one must stop."""


def is_fatal(error: BaseException) -> bool:
    return isinstance(error, KafkaError) and error.code in FATAL_ERRORS


def log(journal: TextIO, line: str) -> None:
    journal.write(line.replace("\n", " ")[:300] + "\n")
    journal.flush()


def retried(call, journal: TextIO, what: str) -> None:
    """`call()` until it succeeds; a fatal error raises Fenced."""
    for attempt in range(ATTEMPTS):
        try:
            call()
            return
        except Exception as error:  # every failure is journaled and retried
            if is_fatal(error):
                raise Fenced(str(error)) from error
            log(journal, f"R {what} attempt {attempt}: {error!r}")
            time.sleep(0.5)
    raise RuntimeError(f"{what} failed {ATTEMPTS} times")


def rewind(consumer: Consumer, journal: TextIO) -> None:
    """Back to the group's committed offsets: the aborted records are read again."""
    assigned = consumer.assignment()
    holder: dict = {}
    retried(lambda: holder.update(committed=consumer.committed(assigned)), journal, "committed")
    for tp in assigned:
        found = holder["committed"].get(tp)
        if found is None:
            consumer.seek_to_beginning([tp])
        else:
            consumer.seek(tp, found.offset)


def copy_one_poll(consumer: Consumer, producer: Producer, output: str, journal: TextIO) -> None:
    records = consumer.poll(timeout=0.5)
    if not records:
        return
    try:
        producer.begin_transaction()
        offsets: dict[tuple[str, int], int] = {}
        for record in records:
            producer.send(output, copied(record.value), partition=record.partition)
            offsets[(record.topic, record.partition)] = record.offset + 1
        producer.flush(CALL_TIMEOUT_S)
        log(journal, f"W {len(records)}")  # written, not yet committed: a kill now aborts them
        hold = Path(journal.name + ".hold")
        while hold.exists():  # the test is about to kill this process mid-transaction
            time.sleep(0.01)
        time.sleep(TXN_PAUSE_S)
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata(), CALL_TIMEOUT_S)
        commit = producer.commit_transaction
        try:
            commit(CALL_TIMEOUT_S)
        except TimeoutError:  # the outcome is the coordinator's: ask again
            retried(lambda: commit(CALL_TIMEOUT_S), journal, "commit")
        log(journal, f"C {len(records)}")
    except Fenced:
        raise
    except Exception as error:  # abort, rewind, and go on
        if is_fatal(error):
            raise Fenced(str(error)) from error
        log(journal, f"A {error!r}")
        retried(lambda: producer.abort_transaction(CALL_TIMEOUT_S), journal, "abort")
        rewind(consumer, journal)


def main(argv: list[str]) -> int:
    bootstrap, input_topic, output, group, transactional_id, journal_path, stop_path = argv
    stop_file = Path(stop_path)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "max.poll.records": 20,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 20_000,
            "delivery.timeout.ms": 25_000,
            "request.timeout.ms": 5_000,
        }
    )
    with open(journal_path, "a") as journal:
        try:
            consumer.subscribe([input_topic])
            retried(lambda: producer.init_transactions(CALL_TIMEOUT_S), journal, "init")
            log(journal, "S")
            while not stop_file.exists():
                copy_one_poll(consumer, producer, output, journal)
        except Fenced as fenced:
            log(journal, f"F {fenced}")
            return 3
        finally:
            consumer.close()
            producer.close(5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

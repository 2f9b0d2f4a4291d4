"""The transactions kept beside a partition log: its `.txnindex` files and its unstable
transactions (the I/O half of transaction_index.py, as producer_log_state.py is producer_state's).

Theory of operation (DESIGN §3 and §5; Kafka's TransactionIndex files and unreplicated
transactions). `Log` (log.py) feeds this, through its ProducerTransactions
(producer_transactions.py), at each step that moves the log end:

- every append's ended transactions are kept as unstable until the partition says its high
  watermark passed their marker (`on_appended`, `on_high_watermark`), and each aborted one's
  index entry is appended, without fsync, to the `.txnindex` file of the segment holding its
  marker. Each producer snapshot lists the unstable ones (`unsettled`), and a load takes them
  back from the one it starts from with what its replay found, then settles those below the
  partition's checkpointed high watermark (loading.py);
- `sync` fsyncs the files written since the last sync (and the directory when one was created);
  a flush calls it before it moves the recovery point (log_durability.py), so every entry whose
  marker lies below the recovery point is durable;
- a replay of the log from offset S (loading, truncation) rebuilds every entry from S on
  (`on_replayed`): entries whose marker is below S are kept, the rest are dropped and written
  again from what the replay found. After an unclean stop the loader replays from a producer
  snapshot at or below the recovery point, so whatever a crash lost or tore above it is rebuilt,
  and what lies below it was synced. A file that fails its check anywhere (`load` cuts it at its
  first bad entry) makes the loader replay from at most its segment's base, after a clean
  shutdown too: the log, not the index, says what was aborted (DESIGN §3);
- truncation drops the entries (and unstable transactions) at or above the new log end
  (`on_truncate`); a full truncation forgets everything (`on_truncate_fully`); a deleted segment
  takes its file with it (Segment.delete) and `retain` forgets its entries.

Every segment's entries are held in memory (36 bytes each on disk; aborts are rare next to the
records they abort), so a read_committed fetch never reads an index file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from samsa.services.broker.log.checkpoint_file import fsync_directory, read_if_exists, write_all
from samsa.services.broker.log.producer_state import CompletedTransaction
from samsa.services.broker.log.segment import TXN_INDEX_SUFFIX, parse_base_offset, segment_path
from samsa.services.broker.log.transaction_index import (
    ENTRY_BYTES,
    AbortedTransaction,
    UnstableTransactions,
    collect_aborted,
    decode_entries,
    encode_entry,
)

log = logging.getLogger(__name__)


class TransactionLogState:
    """One log's aborted-transaction index (per segment) and unstable transactions."""

    def __init__(self, directory: Path, entries: dict[int, list[AbortedTransaction]]) -> None:
        self._directory = directory
        # segment base offset -> its entries in marker order; only segments that have some.
        self._entries = entries
        self._unstable = UnstableTransactions()
        # The partition's high watermark moved (leader or follower): transactions whose marker
        # it passed are settled, so the list holds what lies above it and the LSO only reads
        # (UnstableTransactions; bound here: one call per move, a comparison when nothing
        # settles).
        self.on_high_watermark: Callable[[int], None] = self._unstable.on_high_watermark
        self._unsynced: set[int] = set()  # base offsets of files written since the last sync
        self._rewrite: set[int] = set()  # files a write failed on: `sync` rewrites them whole
        self._created = False  # a file was created since the last sync

    @classmethod
    def empty(cls, directory: Path) -> TransactionLogState:
        return cls(directory, {})

    @classmethod
    def load(cls, directory: Path, names: Iterable[str]) -> tuple[TransactionLogState, list[int]]:
        """Read every `.txnindex` file among `names`; one that fails its check is cut at its
        first bad entry. Returns the state and the base offsets of the segments whose file was
        cut: the loader must replay from at most the lowest (a torn tail after a crash lies
        above the recovery point, but bit rot can hit a file far below it, or after a clean
        shutdown). A missing file reads as no entry (as in Kafka): nothing tells it from a
        segment without aborts."""
        entries: dict[int, list[AbortedTransaction]] = {}
        cut: list[int] = []
        for name in names:
            base_offset = parse_base_offset(name, TXN_INDEX_SUFFIX)
            if base_offset is None:
                continue
            path = segment_path(directory, base_offset, TXN_INDEX_SUFFIX)
            data = read_if_exists(path) or b""
            found, valid = decode_entries(data)
            if valid < len(data):
                log.warning(
                    "%s: cutting %d bytes of a torn or corrupt transaction index",
                    path,
                    len(data) - valid,
                    extra={"segment": str(path), "discarded_bytes": len(data) - valid},
                )
                os.truncate(path, valid)
                cut.append(base_offset)
            if found:
                entries[base_offset] = found
        return cls(directory, entries), cut

    # --- feeding -------------------------------------------------------------------------------

    def on_appended(
        self,
        completed: Sequence[CompletedTransaction],
        aborted: Sequence[AbortedTransaction],
        segment_base_offset: int,
    ) -> None:
        """An append ended `completed`; index the `aborted` ones in the segment it went to."""
        if completed:
            self._unstable.on_completed(completed)
        if aborted:
            self._append(segment_base_offset, aborted)

    def on_replayed(
        self,
        from_offset: int,
        completed: Sequence[CompletedTransaction],
        aborted: Sequence[tuple[int, AbortedTransaction]],
    ) -> None:
        """A replay from `from_offset` found these transactions (aborted ones with the base
        offset of the segment holding their marker): rebuild every entry from there on."""
        self._drop_from(from_offset)
        self._unstable.on_truncate(from_offset)
        self._unstable.on_completed(completed)
        by_segment: dict[int, list[AbortedTransaction]] = {}
        for base_offset, entry in aborted:
            by_segment.setdefault(base_offset, []).append(entry)
        for base_offset, entries in by_segment.items():
            self._append(base_offset, entries)

    def on_truncate(self, log_end_offset: int) -> None:
        self._drop_from(log_end_offset)
        self._unstable.on_truncate(log_end_offset)

    def on_truncate_fully(self) -> None:
        for base_offset in self._entries:
            self._path(base_offset).unlink(missing_ok=True)
        self._entries.clear()
        self._unsynced.clear()
        self._rewrite.clear()
        self._unstable.on_truncate(0)  # every marker (kept: on_high_watermark is bound)

    def retain(self, base_offsets: Iterable[int]) -> None:
        """Forget the entries of segments that are gone (their files went with them)."""
        kept = set(base_offsets)
        for base_offset in [base for base in self._entries if base not in kept]:
            del self._entries[base_offset]
            self._unsynced.discard(base_offset)
            self._rewrite.discard(base_offset)

    def sync(self) -> None:
        """fsync the index files written since the last sync (rewritten whole first when a
        write to them failed), and the directory after a file was created."""
        for base_offset in sorted(self._rewrite):
            self._write(self._path(base_offset), self._entries.get(base_offset, []), os.O_TRUNC)
            self._rewrite.discard(base_offset)
        for base_offset in sorted(self._unsynced):
            fd = os.open(self._path(base_offset), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._unsynced.clear()
        if self._created:
            fsync_directory(self._directory)
            self._created = False

    # --- reading -------------------------------------------------------------------------------

    def last_stable_offset(self, open_first_offsets: Iterable[int], high_watermark: int) -> int:
        """min(high watermark, first offset of every open or not yet replicated transaction)."""
        return self._unstable.last_stable_offset(open_first_offsets, high_watermark)

    def aborted(
        self, base_offsets: Sequence[int], fetch_offset: int, upper_bound: int
    ) -> list[AbortedTransaction]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), given the base
        offsets of the segment holding fetch_offset and of every later one."""
        if not self._entries:
            return []
        return collect_aborted(self._segment_entries(base_offsets), fetch_offset, upper_bound)

    def unsettled(self) -> list[CompletedTransaction]:
        """The ended transactions the high watermark has not passed, in marker order (each
        producer snapshot lists them: a restart must not forget them)."""
        return self._unstable.unsettled()

    @property
    def high_watermark(self) -> int:
        """The last high watermark the partition told (0 before the first)."""
        return self._unstable.high_watermark

    def unstable_count(self) -> int:
        """How many ended transactions wait for the high watermark to pass their marker: what
        each LSO walks, held in memory (for tests and tools)."""
        return len(self._unstable)

    def entries(self) -> dict[int, list[AbortedTransaction]]:
        """Every segment's entries (for tests and tools)."""
        return {base: list(found) for base, found in sorted(self._entries.items())}

    # --- files ---------------------------------------------------------------------------------

    def _segment_entries(self, base_offsets: Sequence[int]) -> Iterator[list[AbortedTransaction]]:
        for base_offset in base_offsets:
            yield self._entries.get(base_offset, [])

    def _append(self, base_offset: int, entries: Sequence[AbortedTransaction]) -> None:
        """Keep the entries, then append them to the file. Their markers are in the log
        already, so a failed write (disk full) must not lose them: they stay in memory and the
        file, perhaps torn, is rewritten whole by the next `sync`, before a flush moves the
        recovery point past them (a crash before then rebuilds them by replay)."""
        path = self._path(base_offset)
        existed = base_offset in self._entries or path.exists()
        self._entries.setdefault(base_offset, []).extend(entries)
        self._unsynced.add(base_offset)
        self._created |= not existed
        try:
            self._write(path, entries, os.O_APPEND)
        except OSError:
            self._rewrite.add(base_offset)
            raise

    def _write(self, path: Path, entries: Sequence[AbortedTransaction], mode: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o644)
        try:
            write_all(fd, b"".join(encode_entry(entry) for entry in entries))
        finally:
            os.close(fd)

    def _drop_from(self, offset: int) -> None:
        """Drop every entry whose marker is at or above `offset` (a suffix of each file)."""
        for base_offset in list(self._entries):
            found = self._entries[base_offset]
            kept = [entry for entry in found if entry.last_offset < offset]
            if len(kept) == len(found):
                continue
            if kept:
                os.truncate(self._path(base_offset), len(kept) * ENTRY_BYTES)
                self._entries[base_offset] = kept
                self._unsynced.add(base_offset)
            else:
                self._path(base_offset).unlink(missing_ok=True)
                del self._entries[base_offset]
                self._unsynced.discard(base_offset)
                self._rewrite.discard(base_offset)

    def _path(self, base_offset: int) -> Path:
        return segment_path(self._directory, base_offset, TXN_INDEX_SUFFIX)

"""Goal: a controller whose Raft journal was compacted but whose metadata snapshot (pysyncobj's
dump) is gone stops at start, naming the problem, as it does for a corrupt dump. It started
silently instead: pysyncobj, finding no dump, began at entry 1 with an empty state, and since
the compaction had dropped the entries it would apply first, it never applied anything again. It
served an empty image (no brokers, no topics) for ever and, if elected Raft leader, never became
the active controller (its barrier entry never applied), leaving the cluster without metadata
writes. A lost rename of the dump after a power loss, or an operator removing the file, gets
there.

Method: a real pysyncobj journal file (its FileJournal, no Raft node, no port), compacted as
pysyncobj compacts it (deleteEntriesTo), with and without the dump beside it.
"""

from __future__ import annotations

from pathlib import Path

from pysyncobj.journal import FileJournal

from samsa.services.controller.quorum import (
    DUMP_FILE_NAME,
    JOURNAL_FILE_NAME,
    journal_first_index,
    missing_dump_problem,
)


def _journal(data_dir: Path, entries: range, *, compact_to: int = 0) -> None:
    journal = FileJournal(str(data_dir / JOURNAL_FILE_NAME))
    for index in entries:
        journal.add(b"\x00entry", index, 1)
    if compact_to:
        journal.deleteEntriesTo(compact_to)
    journal._destroy()


def test_a_compacted_journal_without_its_dump_is_refused(tmp_path: Path) -> None:
    _journal(tmp_path, range(1, 41), compact_to=32)
    assert journal_first_index(tmp_path / JOURNAL_FILE_NAME) == 33
    problem = missing_dump_problem(tmp_path)
    assert problem is not None
    assert "starts at entry 33" in problem and DUMP_FILE_NAME in problem


def test_a_compacted_journal_with_its_dump_starts(tmp_path: Path) -> None:
    _journal(tmp_path, range(1, 41), compact_to=32)
    (tmp_path / DUMP_FILE_NAME).write_bytes(b"a dump")  # read (and checked) by pysyncobj later
    assert missing_dump_problem(tmp_path) is None


def test_a_journal_from_entry_1_or_none_at_all_needs_no_dump(tmp_path: Path) -> None:
    assert journal_first_index(tmp_path / JOURNAL_FILE_NAME) is None
    assert missing_dump_problem(tmp_path) is None  # a new controller
    _journal(tmp_path, range(1, 1))
    assert journal_first_index(tmp_path / JOURNAL_FILE_NAME) is None  # created, still empty
    _journal(tmp_path, range(1, 6))
    assert journal_first_index(tmp_path / JOURNAL_FILE_NAME) == 1
    assert missing_dump_problem(tmp_path) is None

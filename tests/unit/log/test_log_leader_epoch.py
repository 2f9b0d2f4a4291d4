"""Goal: the leader-epoch cache follows Kafka's LeaderEpochFileCache (KIP-101, KIP-279) and its
checkpoint text round-trips and refuses anything malformed.

Method: pure objects; each KIP-101 answer case (undefined, latest, between, below the first,
above the last) is spelled out, as are the non-monotonic assignments Kafka truncates.
"""

from __future__ import annotations

import pytest

from samsa.services.broker.log.checkpoint_format import (
    CorruptCheckpointError,
    decode_checkpoint,
    encode_checkpoint,
)
from samsa.services.broker.log.leader_epoch import LeaderEpochCache, epoch_of


def test_assign_records_only_new_epochs() -> None:
    cache = LeaderEpochCache()
    assert cache.latest_epoch == -1
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5), "another batch of the current epoch"
    assert cache.assign(3, 10)
    assert cache.entries() == [(1, 0), (3, 10)]
    assert cache.start_offset_of(3) == 10 and cache.start_offset_of(2) is None


def test_assign_truncates_conflicting_entries() -> None:
    cache = LeaderEpochCache([(1, 0), (3, 10), (5, 20)])
    assert cache.assign(4, 15), "a lower epoch than the latest rewrites from there"
    assert cache.entries() == [(1, 0), (3, 10), (4, 15)]
    assert cache.assign(6, 12), "a start offset below later entries removes them"
    assert cache.entries() == [(1, 0), (3, 10), (6, 12)]
    assert cache.assign(6, 11), "the same epoch at a smaller offset moves its start"
    assert cache.entries() == [(1, 0), (3, 10), (6, 11)]


def test_end_offset_for_epoch_follows_kip_101() -> None:
    cache = LeaderEpochCache([(2, 10), (4, 30), (7, 50)])
    assert cache.end_offset_for_epoch(-1, 80) == (-1, -1), "undefined epoch"
    assert cache.end_offset_for_epoch(7, 80) == (7, 80), "latest epoch: the log end"
    assert cache.end_offset_for_epoch(4, 80) == (4, 50)
    assert cache.end_offset_for_epoch(5, 80) == (4, 50), "unknown epoch: its floor epoch"
    assert cache.end_offset_for_epoch(1, 80) == (1, 10), "below the first: the first start"
    assert cache.end_offset_for_epoch(8, 80) == (-1, -1), "above every epoch"
    assert LeaderEpochCache().end_offset_for_epoch(0, 80) == (-1, -1)


def test_truncate_from_end_drops_epochs_starting_at_or_after() -> None:
    cache = LeaderEpochCache([(2, 10), (4, 30), (7, 50)])
    assert not cache.truncate_from_end(51)
    assert cache.truncate_from_end(30)
    assert cache.entries() == [(2, 10)]


def test_truncate_from_start_moves_the_straddling_epoch() -> None:
    cache = LeaderEpochCache([(2, 10), (4, 30), (7, 50)])
    assert not cache.truncate_from_start(5)
    assert cache.truncate_from_start(35)
    assert cache.entries() == [(4, 35), (7, 50)]
    assert not cache.truncate_from_start(35), "exclusive: an entry at the offset stays"
    assert cache.truncate_from_start(50)
    assert cache.entries() == [(7, 50)]


def test_checkpoint_round_trip_and_rejections() -> None:
    entries = [(2, 10), (4, 30)]
    data = encode_checkpoint(entries)
    assert data == b"0\n2\n2 10\n4 30\n"
    assert decode_checkpoint(data, fields=2) == entries
    assert decode_checkpoint(encode_checkpoint([]), fields=2) == []
    for bad in (b"", b"1\n0\n", b"0\n3\n2 10\n", b"0\n1\n2\n", b"0\n1\nx y\n", b"\xff\n"):
        with pytest.raises(CorruptCheckpointError):
            decode_checkpoint(bad, fields=2)
    with pytest.raises(CorruptCheckpointError, match="order"):
        LeaderEpochCache.from_checkpoint([(4, 30), (2, 40)])
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache.from_checkpoint([(1, -3)])
    assert LeaderEpochCache.from_checkpoint(entries).entries() == entries


def test_epoch_of_names_the_epoch_whose_range_holds_an_offset() -> None:
    entries = [(2, 10), (5, 20), (6, 35)]
    assert [epoch_of(entries, offset) for offset in (0, 9, 10, 19, 20, 34, 35, 1_000)] == [
        -1,
        -1,
        2,
        2,
        5,
        5,
        6,
        6,
    ]
    assert epoch_of([], 7) == -1
    assert epoch_of(entries, -1) == -1, "nothing found"

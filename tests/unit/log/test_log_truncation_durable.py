"""Goal: a follower's truncation survives an OS crash whenever the leader-epoch checkpoint written
after it does, so no replica keeps an old epoch's records at offsets its cache gives a new epoch
(KIP-101 would never truncate them: the new leader's end offset for that epoch matches). The cut
used to be left to the page cache while the next append durably checkpointed the new epoch at
the truncation point; a crash brought the cut batches back under that claim. The truncation now
fdatasyncs the segment it cut; the segments it deletes are covered by the directory fsync of the
checkpoint that writes the new epoch.

Method: a real Log under os_crash.OsCrash (files and directory entries keep only what fsync made
durable). Epoch 3 writes old-0..old-9, flushed, in one segment or two (segment.ms rolls at
offset 5); the log truncates to 3 as a follower of epoch 5 and appends epoch 5's batch at 3,
unflushed; the OS crashes. The reopened log must not hold an old record at or above offset 3
while its cache says epoch 5 starts at 3.
"""

from __future__ import annotations

import pytest
from log_helpers import batch, read_all, small_config
from os_crash import OsCrash

from samsa.services.broker.log.log import Log

NOW = 1_000_000
CONFIG = small_config(segment_bytes=1 << 20, segment_ms=1_000)


@pytest.mark.parametrize("segment_bases", [[0], [0, 5]], ids=["one segment", "two segments"])
def test_a_truncated_tail_stays_cut_after_an_os_crash(
    os_crash: OsCrash, segment_bases: list[int]
) -> None:
    log = Log.open(os_crash.directory, CONFIG, now_ms=NOW)
    log.start_leader_epoch(3)
    for offset in range(10):
        at = NOW + (2_000 if offset >= 5 and len(segment_bases) == 2 else 0)
        log.append_as_leader(batch(b"old-%d" % offset, timestamp=at), leader_epoch=3, now_ms=at)
    assert [segment.base_offset for segment in log.segments()] == segment_bases
    log.flush()
    log.truncate_to(3)  # the leader of epoch 5 diverged at 3
    log.append_as_follower(
        batch(b"new-3", timestamp=NOW, base_offset=3, partition_leader_epoch=5), now_ms=NOW
    )
    assert log.leader_epoch_entries() == [(3, 0), (5, 3)]
    log._local_log.close()  # the OS dies: no flush, no checkpoint, no marker
    os_crash.crash()

    log = Log.open(os_crash.directory, CONFIG, now_ms=NOW)
    try:
        values = [record.value for record in read_all(log)]
        assert values[:3] == [b"old-0", b"old-1", b"old-2"]
        assert values[3:] in ([], [b"new-3"]), f"epochs {log.leader_epoch_entries()}"
        assert [segment.base_offset for segment in log.segments()] == [0]
    finally:
        log.close()

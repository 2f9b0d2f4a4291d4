"""Goal: a follower never appends a deleted topic's records into the log of the topic created
again under its name (KIP-516). Its fetches name the topic id its metadata shows, so a leader
still hosting the old topic answers UNKNOWN_TOPIC_ID instead of the old records; and an answer
to a fetch sent for the old topic, arriving after the follower re-created the partition, is not
taken for the new log even where both logs end at the same offset.

Method: real logs in tmp_path hosted from hand-made images (broker_host.py); the follower's own
request builder (replica_fetcher._request over follower_position) read by the leader's fetch
adapter, and the follower's apply rules (follower_apply.py) called directly.
"""

from __future__ import annotations

from pathlib import Path

from broker_host import hosting, two_broker_image

from samsa.common.errors import ErrorCode
from samsa.common.fetch_session_client import FetchParts
from samsa.common.record.codec import build_batch
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.replica.follower_apply import (
    answer_is_current,
    apply_leader_answer,
    follower_position,
)
from samsa.services.broker.replica.replica_fetcher import _request
from samsa.services.broker.requests.fetch import read_once

OLD_ID, NEW_ID = b"\x0a" * 16, b"\x0b" * 16
LEADER, FOLLOWER = 1, 2


def test_a_follower_of_the_new_topic_gets_none_of_a_stale_leaders_old_records(tmp_path: Path):
    old, new = two_broker_image(OLD_ID, 1), two_broker_image(NEW_ID, 1)
    with (
        hosting(tmp_path / "leader", old, LEADER) as leader,
        hosting(tmp_path / "follower", new, FOLLOWER) as follower,
    ):
        stale = leader.get("t", 0)
        assert stale is not None
        stale.log.append_as_leader(build_batch([b"old"]), leader_epoch=0, now_ms=0)
        hosted = follower.get("t", 0)
        assert hosted is not None
        position = follower_position(hosted)
        assert position.topic_id == NEW_ID
        request = _request(FOLLOWER, FetchParts(0, 0, True, {("t", 0): position}, ()))
        assert request.topics[0].topic_id == NEW_ID
        response, _, _ = read_once(leader, request)
        result = response.topics[0].partitions[0]
        assert result.error_code == ErrorCode.UNKNOWN_TOPIC_ID and not result.records
        assert not apply_leader_answer(hosted, result, now_ms=0)
        assert hosted.log.log_end_offset == 0


def test_an_answer_for_the_old_topic_is_not_current_for_the_new_one(tmp_path: Path):
    """Fetch sent for the old topic at offset 0; meanwhile the follower applies its deletion and
    re-creation: the new log also ends at 0, yet the answer holds the old topic's records."""
    old, new = two_broker_image(OLD_ID, 1), two_broker_image(NEW_ID, 1)
    with hosting(tmp_path, old, FOLLOWER) as host:
        before = host.get("t", 0)
        assert before is not None
        sent = follower_position(before)
        assert answer_is_current(before, LEADER, sent)
        host.apply(new, partition_changes(old, new, FOLLOWER), now_ms=0)
        after = host.get("t", 0)
        assert after is not None and after.topic_id == NEW_ID
        assert after.log.log_end_offset == sent.fetch_offset
        assert not answer_is_current(after, LEADER, sent)

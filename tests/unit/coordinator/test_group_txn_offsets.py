"""Goal: offsets committed in a transaction are checked like OffsetCommit (member epoch, KIP-447),
are not applied when written, stay pending per producer until its marker, are applied at a
COMMIT and dropped at an ABORT exactly as replay would apply them, and make OffsetFetch with
require_stable answer UNSTABLE_OFFSET_COMMIT for their partitions (only theirs, only then).

Method: the pure GroupCoordinatorShard with hand-built requests; the state after each step is
compared with a shard that replayed only the records a committed transaction made visible.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode
from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

TOPICS = {"t": 2}
NOW = 1_000


def txn_commit(
    group: str, offsets: dict[tuple[str, int], int], member: str = "", epoch: int = -1
) -> x.TxnOffsetCommitRequest:
    request = x.TxnOffsetCommitRequest(
        producer=x.TransactionalProducer(transactional_id="tx", producer_id=7, producer_epoch=0),
        group_id=group,
        member_id=member,
        member_epoch=epoch,
    )
    for (topic, partition), offset in offsets.items():
        request.topics.add(name=topic).partitions.add(partition=partition, committed_offset=offset)
    return request


def pending(shard: GroupCoordinatorShard, offset: int, written: list[GroupRecord]) -> None:
    """Producer 7's transactional batch of `written` is durable at `offset`."""
    shard.replay_transactional(7, [(offset + i, record) for i, record in enumerate(written)])


def fetch(shard: GroupCoordinatorShard, group: str, *, stable: bool) -> dict[int, tuple[int, int]]:
    request = c.OffsetFetchRequest(
        group_id=group, topics=[c.TopicPartitions(topic="t", partitions=[0, 1])]
    )
    request.require_stable = stable
    response = shard.fetch_offsets(request)
    return {p.partition: (p.committed_offset, p.error_code) for p in response.topics[0].partitions}


def test_pending_offsets_apply_at_commit_and_vanish_at_abort() -> None:
    shard = GroupCoordinatorShard()
    result = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 10}), NOW, TOPICS)
    assert [r.error_code for r in result.response.results] == [ErrorCode.NONE]
    assert len(result.records) == 1
    assert fetch(shard, "g", stable=False) == {0: (-1, 0), 1: (-1, 0)}, "not applied yet"
    pending(shard, 100, result.records)
    assert fetch(shard, "g", stable=False)[0] == (-1, 0), "pending is not committed"
    assert fetch(shard, "g", stable=True) == {
        0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        1: (-1, ErrorCode.NONE),
    }
    other = shard.complete_transaction(8, committed=True, marker_offset=200)
    assert other == 0, "another producer's marker"
    assert shard.complete_transaction(7, committed=True, marker_offset=200) == 1
    assert fetch(shard, "g", stable=True) == {0: (10, 0), 1: (-1, 0)}

    again = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 20, ("t", 1): 5}), NOW, TOPICS)
    pending(shard, 300, again.records)
    assert shard.complete_transaction(7, committed=False, marker_offset=400) == 0
    assert fetch(shard, "g", stable=True) == {0: (10, 0), 1: (-1, 0)}, "the abort left nothing"


def test_committed_offsets_equal_a_replay_of_the_visible_records() -> None:
    shard = GroupCoordinatorShard()
    first = shard.commit_txn_offsets(txn_commit("g", {("t", 1): 3}), NOW, TOPICS)
    pending(shard, 10, first.records)
    shard.complete_transaction(7, committed=True, marker_offset=20)
    replayed = GroupCoordinatorShard()
    for record in first.records:
        replayed.replay(record, 10)
    assert shard.state == replayed.state


def test_txn_offsets_are_checked_like_offset_commit() -> None:
    shard = GroupCoordinatorShard()
    unknown = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 1}, "zed", 3), NOW, TOPICS)
    assert [r.error_code for r in unknown.response.results] == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert unknown.records == []
    missing = shard.commit_txn_offsets(txn_commit("g", {("t", 9): 1}), NOW, TOPICS)
    assert [r.error_code for r in missing.response.results] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ]
    negative = shard.commit_txn_offsets(txn_commit("g", {("t", 0): -4}), NOW, TOPICS)
    assert [r.error_code for r in negative.response.results] == [ErrorCode.INVALID_REQUEST]
    assert not shard.txn_offsets


def test_a_marker_seen_late_ends_only_what_was_written_before_it() -> None:
    shard = GroupCoordinatorShard()
    aborted = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 17}), NOW, TOPICS)
    pending(shard, 10, aborted.records)
    # the next transaction's offsets are written (at 30) before the ABORT marker (at 20) is seen
    committed = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 42}), NOW, TOPICS)
    pending(shard, 30, committed.records)
    assert shard.complete_transaction(7, committed=False, marker_offset=20) == 0
    assert fetch(shard, "g", stable=True)[0] == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert shard.complete_transaction(7, committed=True, marker_offset=40) == 1
    assert fetch(shard, "g", stable=True)[0] == (42, ErrorCode.NONE)


def plain_commit(shard: GroupCoordinatorShard, offset: int) -> list:
    """A plain OffsetCommit of t-0 by a group without members (applied as it is written)."""
    request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=0, committed_offset=offset)
    result = shard.commit_offsets(request, NOW, TOPICS)
    assert [p.error_code for p in result.response.topics[0].partitions] == [ErrorCode.NONE]
    return result.records


def test_a_plain_commit_after_a_pending_offset_wins_as_kafka_orders_them_by_log_offset() -> None:
    """Log: the transaction's offset 17 at 10, a plain commit of 5 at 20, the COMMIT at 30. Live,
    from a full load and from a compacted load (the cleaner keeps the newest record of the key,
    the plain one at 20) the group's offset is 5; with the plain commit before the transaction's
    offset, the transaction's wins."""
    live = GroupCoordinatorShard()
    txn = live.commit_txn_offsets(txn_commit("g", {("t", 0): 17}), NOW, TOPICS)
    pending(live, 10, txn.records)
    plain = plain_commit(live, 5)
    live.mark_durable(plain, 20)
    assert live.complete_transaction(7, committed=True, marker_offset=30) == 0
    assert fetch(live, "g", stable=True)[0] == (5, ErrorCode.NONE)

    loaded = GroupCoordinatorShard()
    pending(loaded, 10, txn.records)
    for record in plain:
        loaded.replay(record, 20)
    loaded.complete_transaction(7, committed=True, marker_offset=30)
    compacted = GroupCoordinatorShard()
    for record in plain:
        compacted.replay(record, 20)
    compacted.complete_transaction(7, committed=True, marker_offset=30)
    assert live.state == loaded.state == compacted.state

    before = GroupCoordinatorShard()
    before.mark_durable(plain_commit(before, 5), 20)
    later = before.commit_txn_offsets(txn_commit("g", {("t", 0): 17}), NOW, TOPICS)
    pending(before, 30, later.records)
    assert before.complete_transaction(7, committed=True, marker_offset=40) == 1
    assert fetch(before, "g", stable=True)[0] == (17, ErrorCode.NONE)


def test_a_plain_commit_made_while_the_transactions_offsets_are_written_is_ordered_by_the_log() -> (
    None
):
    """The plain and the transactional writes travel separately, so a plain commit applied while
    the TxnOffsetCommit is in flight can land on either side of it, and its answer can come
    first or second. Whatever the coordinator saw first, it agrees with a load of the log: the
    later of the two records wins."""
    for plain_at, txn_at in ((11, 10), (10, 11)):
        for plain_answered_first in (True, False):
            live = GroupCoordinatorShard()
            txn = live.commit_txn_offsets(txn_commit("g", {("t", 0): 17}), NOW, TOPICS)
            plain = plain_commit(live, 5)  # applied now, durable later
            if plain_answered_first:
                live.mark_durable(plain, plain_at)
                pending(live, txn_at, txn.records)
            else:
                pending(live, txn_at, txn.records)
                live.mark_durable(plain, plain_at)
            live.complete_transaction(7, committed=True, marker_offset=20)

            loaded = GroupCoordinatorShard()
            for at in sorted((plain_at, txn_at)):
                if at == plain_at:
                    for record in plain:
                        loaded.replay(record, at)
                else:
                    pending(loaded, at, txn.records)
            loaded.complete_transaction(7, committed=True, marker_offset=20)
            expected = 5 if plain_at > txn_at else 17
            case = (plain_at, txn_at, plain_answered_first)
            assert fetch(live, "g", stable=True)[0] == (expected, ErrorCode.NONE), case
            assert live.state == loaded.state, case


def test_a_plain_commit_still_in_flight_at_the_marker_wins() -> None:
    """The runtime resolves markers only once every write queued before it read them is durable
    (offsets_partition.py), so a plain commit still in flight then lands after the marker: the
    transaction's older offset must not overwrite it, then or once the commit is durable."""
    shard = GroupCoordinatorShard()
    txn = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 17}), NOW, TOPICS)
    pending(shard, 10, txn.records)
    plain = plain_commit(shard, 5)
    assert shard.complete_transaction(7, committed=True, marker_offset=20) == 0
    shard.mark_durable(plain, 21)
    assert fetch(shard, "g", stable=True)[0] == (5, ErrorCode.NONE)


def test_only_the_newest_of_several_writes_in_flight_sets_the_position() -> None:
    """Two plain commits in flight: the first becoming durable (at 5) must not make the
    partition look older than a pending offset (at 10) while the second (landing at 15) is still
    in flight."""
    shard = GroupCoordinatorShard()
    first = plain_commit(shard, 1)
    second = plain_commit(shard, 2)
    txn = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 17}), NOW, TOPICS)
    pending(shard, 10, txn.records)
    shard.mark_durable(first, 5)
    assert shard.complete_transaction(7, committed=True, marker_offset=12) == 0
    shard.mark_durable(second, 15)
    assert fetch(shard, "g", stable=True)[0] == (2, ErrorCode.NONE)
    assert not shard.state.offsets_in_flight


def test_two_committed_transactions_whose_first_marker_is_seen_late_apply_in_order() -> None:
    shard = GroupCoordinatorShard()
    first = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 17}), NOW, TOPICS)
    pending(shard, 10, first.records)
    second = shard.commit_txn_offsets(txn_commit("g", {("t", 0): 42}), NOW, TOPICS)
    pending(shard, 30, second.records)  # before the COMMIT at 20 is seen
    assert shard.complete_transaction(7, committed=True, marker_offset=20) == 1
    assert fetch(shard, "g", stable=False)[0] == (17, ErrorCode.NONE)
    assert shard.complete_transaction(7, committed=True, marker_offset=40) == 1
    assert fetch(shard, "g", stable=True)[0] == (42, ErrorCode.NONE)


def test_retention_keeps_offsets_and_groups_a_pending_transaction_will_commit() -> None:
    """Kafka's rule (GroupMetadata.removeExpiredOffsets): an offset with a transactional commit
    pending does not expire, and a group with pending offsets is not deleted, so the COMMIT
    marker applies what the transaction committed instead of finding it tombstoned."""
    from samsa.services.coordinator.group_model import GroupConfig

    retention = 10_000
    shard = GroupCoordinatorShard(GroupConfig(offsets_retention_ms=retention))
    plain = c.OffsetCommitRequest(group_id="g", member_id="", member_epoch=-1)
    plain.topics.add(name="t").partitions.add(partition=0, committed_offset=3)
    shard.mark_durable(shard.commit_offsets(plain, NOW, TOPICS).records, 10)
    shard.expire(NOW)  # the group is empty: retention counts from the commit
    for group in ("g", "fresh"):
        written = shard.commit_txn_offsets(txn_commit(group, {("t", 0): 50}), NOW, TOPICS)
        pending(shard, 100 if group == "g" else 110, written.records)

    expired = shard.expire(NOW + 2 * retention)
    assert expired.records == [], "nothing pending may expire or be deleted"
    assert shard.complete_transaction(7, committed=True, marker_offset=200) == 2
    assert fetch(shard, "g", stable=True) == {0: (50, 0), 1: (-1, 0)}
    assert fetch(shard, "fresh", stable=True) == {0: (50, 0), 1: (-1, 0)}


def test_deleting_a_group_cancels_the_offsets_its_open_transactions_wrote() -> None:
    """Kafka's deleteAllOffsets: DeleteGroups also ends what an open transaction committed for
    the group, so its COMMIT marker does not bring the group back (live, while the deletion is
    in flight or durable, and from a load of the log); a transaction's offset written after the
    deletion creates the group anew. Once nothing is pending, expiry forgets the deletion."""
    live = GroupCoordinatorShard()
    plain = plain_commit(live, 4)
    live.mark_durable(plain, 5)
    txn = live.commit_txn_offsets(txn_commit("g", {("t", 1): 10}), NOW, TOPICS)
    pending(live, 10, txn.records)
    deleted = live.delete_groups(["g"])
    assert deleted.response.groups[0].error_code == ErrorCode.NONE
    loaded = GroupCoordinatorShard()
    for offset, record in enumerate(plain, start=5):
        loaded.replay(record, offset)
    pending(loaded, 10, txn.records)
    for offset, record in enumerate(deleted.records, start=20):
        loaded.replay(record, offset)
    live.mark_durable(deleted.records, 20)
    for shard in (live, loaded):
        assert shard.complete_transaction(7, committed=True, marker_offset=30) == 0
        assert "g" not in shard.state.groups
        shard.expire(NOW)
        assert not shard.state.deleted_positions
    again = live.commit_txn_offsets(txn_commit("g", {("t", 1): 11}), NOW, TOPICS)
    pending(live, 40, again.records)
    assert live.complete_transaction(7, committed=True, marker_offset=50) == 1
    assert fetch(live, "g", stable=True)[1] == (11, ErrorCode.NONE)

    in_flight = GroupCoordinatorShard()
    txn = in_flight.commit_txn_offsets(txn_commit("h", {("t", 0): 10}), NOW, TOPICS)
    pending(in_flight, 10, txn.records)
    request = c.OffsetCommitRequest(group_id="h", member_epoch=-1)
    request.topics.add(name="t").partitions.add(partition=1, committed_offset=1)
    in_flight.mark_durable(in_flight.commit_offsets(request, NOW, TOPICS).records, 11)
    in_flight.delete_groups(["h"])  # not durable yet when the marker is resolved
    assert in_flight.complete_transaction(7, committed=True, marker_offset=12) == 0
    assert "h" not in in_flight.state.groups


def stored_epochs(shard: GroupCoordinatorShard, group: str) -> dict[int, int]:
    request = c.OffsetFetchRequest(
        group_id=group, topics=[c.TopicPartitions(topic="t", partitions=[0, 1])]
    )
    response = shard.fetch_offsets(request)
    return {p.partition: p.committed_leader_epoch for p in response.topics[0].partitions}


def test_a_commit_naming_no_leader_epoch_stores_none_not_epoch_0() -> None:
    """proto3 reads an unset int as 0, a real epoch: a member starting at the offset would then
    fetch with last_fetched_epoch 0 and, once the partition had another leader, be sent back to
    where epoch 0 ended (and read those records again). Unset is -1; a set 0 stays 0."""
    shard = GroupCoordinatorShard()
    txn = txn_commit("g", {("t", 0): 10, ("t", 1): 4})
    txn.topics[1].partitions[0].committed_leader_epoch = 0  # txn_commit: a topic entry each
    result = shard.commit_txn_offsets(txn, NOW, TOPICS)
    pending(shard, 100, result.records)
    shard.complete_transaction(7, committed=True, marker_offset=200)
    assert stored_epochs(shard, "g") == {0: -1, 1: 0}

    plain = c.OffsetCommitRequest(group_id="p", member_epoch=-1)
    partitions = plain.topics.add(name="t").partitions
    partitions.add(partition=0, committed_offset=10)
    partitions.add(partition=1, committed_offset=4, committed_leader_epoch=3)
    for record in shard.commit_offsets(plain, NOW, TOPICS).records:
        shard.replay(record, 300)
    assert stored_epochs(shard, "p") == {0: -1, 1: 3}

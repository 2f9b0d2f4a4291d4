"""Goal: a group's committed offset is decided by the log, whatever order the coordinator saw
things in. Plain OffsetCommits and a transactional producer's TxnOffsetCommits of one partition
travel separately: each is applied (plain) or made pending (transactional) when the coordinator
sees it, lands in the log at some offset, and is answered later. At each COMMIT marker the
pending offset applies only if its record is newer, by log offset, than the record that set the
partition (Kafka's rule, group_txn_offsets.py). After any interleaving, a coordinator that loads
the log holds exactly what the live one holds.

Method: a small model of the runtime over the pure GroupCoordinatorShard, driven in rounds that
hypothesis draws: one transaction of the group's offsets (committed or aborted) and 0-3 plain
commits of the same partition, all their steps in any order the model allows. Plain commits
are applied at once, land in the log in the order they were made (one writer), and are
answered (`mark_durable`) in that order; a transaction's offsets
land and are answered (made pending) separately; its marker lands only once they were answered
(the producer sends EndTxn after TxnOffsetCommit returned), and the marker is resolved as the
runtime does it: first every plain commit made so far lands (if it had not) and is answered,
then the shard completes the transaction. Whenever nothing is in flight, a fresh shard replays
the log (plain records applied at their offset, transactional ones pending, markers resolving
them) and must equal the live one, and the committed offset must be the value of the newest
record, by log offset, that readers see (`newest_visible`, written from the definition).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from samsa.services.coordinator.group_records import GroupRecord
from samsa.services.coordinator.group_shard import GroupCoordinatorShard
from samsa.v1 import coordinator_pb2 as c
from samsa.v1 import transactions_pb2 as x

TOPICS = {"t": 1}
NOW = 1_000
PRODUCER = 7


@dataclass
class Logged:
    """One entry of the modelled log of `__consumer_offsets`."""

    kind: str  # "plain", "txn" or "marker"
    offset: int  # of its first record (a marker is one record)
    records: list[GroupRecord] = field(default_factory=list)
    committed: bool = False


@dataclass
class Model:
    shard: GroupCoordinatorShard = field(default_factory=GroupCoordinatorShard)
    log: list[Logged] = field(default_factory=list)
    # Plain writes not yet landed, then landed but not answered (each: records, offset).
    plain_queued: list[list[GroupRecord]] = field(default_factory=list)
    plain_unanswered: list[tuple[list[GroupRecord], int]] = field(default_factory=list)
    # The open transaction's offset writes: built, landed (unanswered), answered.
    txn_built: list[list[GroupRecord]] = field(default_factory=list)
    txn_unanswered: list[tuple[list[GroupRecord], int]] = field(default_factory=list)
    txn_answered: int = 0
    marker: tuple[int, bool] | None = None  # landed, not resolved yet
    value: int = 0
    end_offset: int = 0  # where the next entry lands

    def append(self, kind: str, records: list[GroupRecord], committed: bool = False) -> int:
        offset = self.end_offset
        self.log.append(Logged(kind, offset, records, committed))
        self.end_offset += max(1, len(records))
        return offset

    def step(self, action: str, committed: bool) -> bool:
        """Do `action` if it can happen now; whether it did."""
        if action == "plain":
            self.value += 1
            request = c.OffsetCommitRequest(group_id="g", member_epoch=-1)
            request.topics.add(name="t").partitions.add(partition=0, committed_offset=self.value)
            self.plain_queued.append(self.shard.commit_offsets(request, NOW, TOPICS).records)
        elif action == "plain_lands" and self.plain_queued:
            records = self.plain_queued.pop(0)
            self.plain_unanswered.append((records, self.append("plain", records)))
        elif action == "plain_answered" and self.plain_unanswered:
            records, offset = self.plain_unanswered.pop(0)
            self.shard.mark_durable(records, offset)
        elif action == "txn" and self.marker is None:
            self.value += 1
            request = x.TxnOffsetCommitRequest(group_id="g", member_epoch=-1)
            request.topics.add(name="t").partitions.add(partition=0, committed_offset=self.value)
            self.txn_built.append(self.shard.commit_txn_offsets(request, NOW, TOPICS).records)
        elif action == "txn_lands" and self.txn_built:
            records = self.txn_built.pop(0)
            self.txn_unanswered.append((records, self.append("txn", records)))
        elif action == "txn_answered" and self.txn_unanswered:
            records, offset = self.txn_unanswered.pop(0)
            self.shard.replay_transactional(
                PRODUCER, [(offset + i, r) for i, r in enumerate(records)]
            )
            self.txn_answered += 1
        elif (
            action == "marker"
            and self.marker is None
            and self.txn_answered
            and not (self.txn_built or self.txn_unanswered)
        ):
            self.marker = (self.append("marker", [], committed), committed)
        elif action == "resolve" and self.marker is not None:
            self.settle_plain()  # the runtime's wait for every write queued so far
            offset, was_committed = self.marker
            self.shard.complete_transaction(PRODUCER, was_committed, offset)
            self.marker, self.txn_answered = None, 0
        else:
            return False
        return True

    def settle_plain(self) -> None:
        while self.plain_queued:
            self.step("plain_lands", False)
        while self.plain_unanswered:
            self.step("plain_answered", False)

    def quiet(self) -> bool:
        return not (
            self.plain_queued
            or self.plain_unanswered
            or self.txn_built
            or self.txn_unanswered
            or self.marker
        )

    def loaded(self) -> GroupCoordinatorShard:
        fresh = GroupCoordinatorShard()
        for entry in self.log:
            offsets = range(entry.offset, entry.offset + len(entry.records))
            if entry.kind == "plain":
                for offset, record in zip(offsets, entry.records, strict=True):
                    fresh.replay(record, offset)
            elif entry.kind == "txn":
                fresh.replay_transactional(PRODUCER, list(zip(offsets, entry.records, strict=True)))
            else:
                fresh.complete_transaction(PRODUCER, entry.committed, entry.offset)
        return fresh


def newest_visible(log: list[Logged]) -> int:
    """The oracle: the value of the newest record, by log offset, that readers see (a plain
    commit, or a transaction's offset whose marker is a COMMIT); -1 when there is none. Kafka's
    rule, applied marker by marker, comes to this once every marker in the log is resolved."""
    newest_at, newest = -1, -1
    open_records: list[tuple[int, int]] = []  # the open transaction's (offset, value)s
    for entry in log:
        if entry.kind == "txn":
            open_records.append(commit_of(entry))
            continue
        if entry.kind == "plain":
            visible = [commit_of(entry)]
        else:
            visible = open_records if entry.committed else []
            open_records = []
        for at, value in visible:
            if at > newest_at:
                newest_at, newest = at, value
    return newest


def commit_of(entry: Logged) -> tuple[int, int]:
    """(log offset, committed offset) of the entry's offset-commit record."""
    for index, (key, value) in enumerate(entry.records):
        if key.HasField("offset_commit"):
            assert value is not None
            return entry.offset + index, value.offset_commit.committed_offset
    raise AssertionError(f"no offset commit in {entry}")


def committed_offset(shard: GroupCoordinatorShard) -> int:
    group = shard.state.groups.get("g")
    offset = None if group is None else group.offsets.get(("t", 0))
    return -1 if offset is None else offset.committed_offset


TRANSACTION = ["txn", "txn_lands", "txn_answered", "marker", "resolve"]
PLAIN_COMMIT = ["plain", "plain_lands", "plain_answered"]


def run_round(model: Model, events: list[str], committed: bool) -> None:
    """Take `events` in their order, each as soon as it can happen (one that cannot yet waits
    for the next that can), checking the model whenever nothing is in flight."""
    waiting = list(events)
    while True:
        done = next((e for e in waiting if model.step(e, committed)), None)
        if done is None:
            return
        waiting.remove(done)
        if model.quiet():
            check(model)


def check(model: Model) -> None:
    assert committed_offset(model.shard) == newest_visible(model.log), model.log
    assert model.loaded().state == model.shard.state


@given(st.data())
def test_the_committed_offset_is_the_logs_whatever_order_the_coordinator_saw(data) -> None:
    """Rounds of one transaction (committed or aborted) of the group's offsets with 0-3 plain
    commits of the same partition, all their steps in any order the model allows."""
    model = Model()
    for _ in range(data.draw(st.integers(1, 5), label="rounds")):
        plain_commits = data.draw(st.integers(0, 3), label="plain commits")
        committed = data.draw(st.booleans(), label="committed")
        events = data.draw(st.permutations(TRANSACTION + PLAIN_COMMIT * plain_commits))
        run_round(model, events, committed)
        assert model.quiet(), "every step of the round happened"
        check(model)

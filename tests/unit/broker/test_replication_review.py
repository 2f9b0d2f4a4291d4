"""Goal: the replication core's answers in the corners a review of it against Kafka's semantics
found wrong (DESIGN §4): each test here failed before its fix.

Method: the pure cores (`PartitionReplica`, `LeaderReplication`) with numbers for offsets and
times, and, where the request path decides, a leader's `PartitionHost` over a real log in
tmp_path read by its own `PartitionReader` as a follower's fetch is.
"""

from __future__ import annotations

import random
from pathlib import Path

from samsa.common.errors import ErrorCode
from samsa.common.fetch_session_client import FetchParts, FetchPosition, fetch_request
from samsa.common.record.codec import build_batch
from samsa.metadata.image import MetadataImage, PartitionState
from samsa.services.broker.hosted_partition import HostedPartition
from samsa.services.broker.metadata.metadata_diff import partition_changes
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.replica.isr_manager import decide_proposals
from samsa.services.broker.replica.partition_replica import PartitionReplica
from samsa.services.broker.requests.partition_read import PartitionReader
from samsa.services.broker.requests.produce import produce
from samsa.services.broker.requests.produce_wait import settled
from samsa.services.controller import control_plane as cp
from samsa.v1 import broker_pb2
from samsa.v1 import controller_pb2 as c
from tests.unit.broker.replication_cluster import (
    KEY,
    TOPIC,
    cluster_with_topic,
    commit,
    heartbeat,
    registered,
)

ME = 1
REPLICAS = (1, 2, 3)
PROPOSAL = {"eligible": {1, 2, 3}, "lag_max_ms": 1000, "replica_fetch_ms": {}}


def state(isr: tuple[int, ...] = REPLICAS, partition_epoch: int = 0) -> PartitionState:
    return PartitionState(0, REPLICAS, isr, ME, 0, partition_epoch)


def test_an_accepted_answer_without_a_proposal_in_flight_blocks_no_isr_change():
    """An AlterPartition answer reaches the ISR manager after its topic was deleted and created
    again under the same name: the new partition (its partition epochs start over at 0) must
    not wait for the old one's partition epoch, or no follower could ever leave or join its
    ISR and acks=all writes would wait on a dead follower for ever."""
    replica = PartitionReplica(ME)
    replica.become_leader(0, state(), log_end_offset=5, now_ms=0)
    replica.follower_fetched(2, 5, 5, now_ms=1000)
    replica.proposal_accepted(partition_epoch=7)  # the deleted topic's answer
    assert replica.isr_to_propose(now_ms=1500, log_end_offset=5, **PROPOSAL) == (1, 2)


# --- caught up across an idle spell ------------------------------------------------------------

LAG_MS = 1000


class Leader:
    """Broker `state.leader`'s host over a real log, leading TOPIC-0 on brokers 1-3 with
    min.insync.replicas=2; its followers are only their fetches, read by its PartitionReader."""

    def __init__(self, data_dir: Path) -> None:
        self.image = cluster_with_topic({"min.insync.replicas": "2"}, random.Random(1))
        self.state = self.image.topics[TOPIC].partitions[0]
        self.host = PartitionHost(data_dir, self.state.leader)
        changes = partition_changes(self.host.image, self.image, self.state.leader)
        self.host.apply(self.image, changes, now_ms=0)
        self.followers = [r for r in self.state.replicas if r != self.state.leader]

    def apply(self, image: MetadataImage) -> MetadataImage:
        """Follow `image` (the controller's, committed); returns it."""
        changes = partition_changes(self.host.image, image, self.state.leader)
        self.host.apply(image, changes, now_ms=0)
        return image

    def shrink_isr_to(self, in_sync: int) -> MetadataImage:
        """The ISR becomes (leader, in_sync), committed by the controller and applied here;
        returns the image."""
        state = self.state
        request = c.AlterPartitionRequest(
            broker_id=state.leader, broker_epoch=self.image.brokers[state.leader].broker_epoch
        )
        request.partitions.add(
            topic=TOPIC,
            partition=0,
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            new_isr=(state.leader, in_sync),
        )
        self.image = self.apply(commit(self.image, cp.alter_partition(self.image, request)))
        return self.image

    @property
    def hosted(self) -> HostedPartition:
        hosted = self.host.get(*KEY)
        assert hosted is not None and hosted.is_leader
        return hosted

    def produce(self, count: int, now_ms: int) -> None:
        request = broker_pb2.ProduceRequest(acks=1)
        values = [b"r%d" % i for i in range(count)]
        request.topics.add(name=TOPIC).partitions.add(partition=0, records=build_batch(values))
        response, _ = produce(self.host, request, now_ms, internal_write_refusal=None)
        assert response.topics[0].partitions[0].error_code == 0

    def fetch(
        self, replica: int, positions: dict[tuple[str, int], FetchPosition], now_ms: int
    ) -> broker_pb2.FetchResponse.PartitionResponse:
        """One pass of `replica`'s fetch naming `positions` (none: a fetch whose session has
        nothing new here, as a follower's fetch for its other partitions is)."""
        parts = FetchParts(0, -1, True, positions, ())
        request = fetch_request(parts, replica_id=replica, max_wait_ms=0, min_bytes=1)
        reader = PartitionReader(self.host, request, now_ms)
        answer = broker_pb2.FetchResponse.PartitionResponse(partition=0)
        for topic in request.topics:
            for wanted in topic.partitions:
                reader.read(topic.name, wanted, answer)
        return answer

    def fetched_by(self, replica: int, offset: int, now_ms: int) -> None:
        position = FetchPosition(offset, self.hosted.leader_epoch, -1, 1 << 20)
        assert self.fetch(replica, {KEY: position}, now_ms).error_code == 0

    def proposal(self, now_ms: int) -> tuple[int, ...] | None:
        decided = decide_proposals(self.host, {KEY}, now_ms=now_ms, lag_max_ms=LAG_MS)
        return None if not decided else decided[0].isr


def test_a_follower_of_a_long_idle_partition_is_in_sync_when_an_append_arrives(tmp_path: Path):
    """Fetch sessions read an idle partition in no fetch (KIP-227), so its followers' own
    progress stands still while they fetch other partitions. The first append after an idle
    spell longer than replica.lag.time.max.ms must not make them look out of sync until they
    report it: the leader proposed an ISR of itself alone, below min.insync.replicas, and the
    acks=all write that arrived failed (NOT_ENOUGH_REPLICAS_AFTER_APPEND), as did every one
    after it until the followers were let back in."""
    leader = Leader(tmp_path)
    leader.produce(5, now_ms=0)
    for follower in leader.followers:
        leader.fetched_by(follower, 5, now_ms=10)
    for now_ms in range(500, 10_000, 500):  # they fetch their other partitions, every 500 ms
        for follower in leader.followers:
            leader.fetch(follower, {}, now_ms)
    assert leader.proposal(now_ms=9_600) is None, "idle and holding everything: in sync"
    leader.produce(1, now_ms=9_700)
    for follower in leader.followers:  # the session reads it for them: they are at 5
        leader.fetched_by(follower, 5, now_ms=9_701)
    assert leader.proposal(now_ms=9_702) is None, "caught up at their fetches of 9_500"


def test_a_follower_stuck_after_an_idle_spell_still_leaves_the_isr(tmp_path: Path):
    leader = Leader(tmp_path)
    leader.produce(5, now_ms=0)
    stuck, steady = leader.followers
    for follower in leader.followers:
        leader.fetched_by(follower, 5, now_ms=10)
    for now_ms in range(500, 10_000, 500):
        for follower in leader.followers:
            leader.fetch(follower, {}, now_ms)
    leader.produce(1, now_ms=9_700)
    for now_ms in range(9_701, 12_000, 100):  # `stuck` asks for 5 again and again
        leader.fetched_by(stuck, 5, now_ms)
        leader.fetched_by(steady, 6, now_ms)
    assert leader.proposal(now_ms=10_400) is None
    assert leader.proposal(now_ms=10_600) == tuple(
        r for r in leader.state.replicas if r != stuck
    ), "in sync last at its fetch of 9_500: out once the lag has passed since"


# --- KIP-320: the leader epoch is checked first ------------------------------------------------


def test_a_fetch_naming_a_later_leader_epoch_is_refused_before_any_divergence_is_read(
    tmp_path: Path,
):
    """A follower that already follows a later leadership (its current leader epoch and its
    last batch's epoch are above this leader's) is answered UNKNOWN_LEADER_EPOCH and asks again
    once this broker has caught up with the metadata log. Before, the divergence check came
    first and answered "undefined" (this log holds no epoch at or below the follower's), which
    sends a follower back to its high watermark, below records another leader acknowledged."""
    leader = Leader(tmp_path)
    leader.produce(5, now_ms=0)
    epoch = leader.hosted.leader_epoch
    follower = leader.followers[0]
    ahead = FetchPosition(7, epoch + 1, epoch + 1, 1 << 20)
    answer = leader.fetch(follower, {KEY: ahead}, now_ms=1)
    assert answer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert not answer.HasField("diverging_epoch")
    progress = leader.hosted.replica.leading.followers[follower]  # type: ignore[union-attr]
    assert progress.log_end_offset == -1, "a refused fetch reports no progress"


# --- a partition no longer hosted --------------------------------------------------------------


def test_an_acks_all_write_waiting_on_a_partition_no_longer_hosted_is_refused_at_once(
    tmp_path: Path,
):
    """The topic is deleted (or the replica moved off this broker) while an acks=all write
    waits for the followers: the host stops the partition, and the write is answered
    NOT_LEADER_OR_FOLLOWER at once rather than REQUEST_TIMED_OUT at the request's timeout
    (Kafka completes its delayed produces when it stops a replica)."""
    leader = Leader(tmp_path)
    request = broker_pb2.ProduceRequest(acks=-1)
    request.topics.add(name=TOPIC).partitions.add(partition=0, records=build_batch([b"a"]))
    _, (wait,) = produce(leader.host, request, 0, internal_write_refusal=None)
    assert not settled(wait), "the followers have not fetched it"
    hosted = leader.hosted
    hosted.stop()  # what the host's StopReplica does
    assert settled(wait)
    assert wait.result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not wait.result.HasField("current_leader"), "no leader to name"
    assert hosted.replica.leading is None and hosted.isr == ()


def test_deleting_the_topic_refuses_the_acks_all_write_waiting_on_it(tmp_path: Path):
    leader = Leader(tmp_path)
    request = broker_pb2.ProduceRequest(acks=-1)
    request.topics.add(name=TOPIC).partitions.add(partition=0, records=build_batch([b"a"]))
    _, (wait,) = produce(leader.host, request, 0, internal_write_refusal=None)
    deletion = cp.delete_topics(leader.image, c.DeleteTopicsRequest(names=[TOPIC]))
    image = commit(leader.image, deletion)
    actions = partition_changes(leader.host.image, image, leader.state.leader)
    leader.host.apply(image, actions, now_ms=1)
    assert leader.host.get(*KEY) is None
    assert settled(wait) and wait.result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_acks_all_write_is_not_completed_by_a_later_leadership_of_the_same_broker(
    tmp_path: Path,
):
    """Leadership moved away and came back (two metadata changes applied before the wait
    looked again): as a follower the broker may have truncated the write and fetched other
    records into its offsets, so the high watermark of the later leadership passing them says
    nothing about the write. It is answered NOT_LEADER_OR_FOLLOWER (the producer retries; an
    idempotent one is deduplicated), naming this broker at its new epoch."""
    leader = Leader(tmp_path)
    request = broker_pb2.ProduceRequest(acks=-1)
    request.topics.add(name=TOPIC).partitions.add(partition=0, records=build_batch([b"a"]))
    _, (wait,) = produce(leader.host, request, 0, internal_write_refusal=None)
    hosted = leader.hosted
    epoch = hosted.leader_epoch
    hosted.replica.become_follower(leader.followers[0], epoch + 1, hosted.replica.state)
    hosted.replica.become_leader(epoch + 2, hosted.replica.state, log_end_offset=1, now_ms=1)
    for follower in leader.followers:
        leader.fetched_by(follower, 1, now_ms=2)
    assert hosted.high_watermark == 1
    assert settled(wait)
    assert wait.result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    current = wait.result.current_leader
    assert (current.leader_id, current.leader_epoch) == (leader.state.leader, epoch + 2)


# --- KIP-903: a restarted follower's earlier fetches do not count ------------------------------


def test_a_follower_restarted_since_its_fetches_is_not_added_to_the_isr_on_them(tmp_path: Path):
    """A follower outside the ISR fetched up to the high watermark, then restarted and lost the
    tail it had not flushed (a power loss). Its new incarnation registers, catches up with the
    metadata log and is unfenced; the leader, still holding the old incarnation's progress,
    proposed it for the ISR, the controller (which sees only that it is unfenced) committed
    it, and a replica missing acknowledged records could then be elected. Kafka's leader sends
    the broker epoch the follower fetched with (KIP-903); this leader counts only fetches it
    read while the follower's current registration was the one in its metadata."""
    leader = Leader(tmp_path)
    in_sync, restarted = leader.followers
    image = leader.shrink_isr_to(in_sync)
    leader.produce(5, now_ms=0)
    leader.fetched_by(in_sync, 5, now_ms=10)
    assert leader.hosted.high_watermark == 5
    leader.fetched_by(restarted, 5, now_ms=10)  # caught up: about to be proposed
    image = registered(image, restarted, "i2", now_ms=20)  # power loss, restart: log at 0
    image = leader.apply(heartbeat(image, restarted, image.end_offset))
    assert not image.brokers[restarted].fenced
    assert leader.proposal(now_ms=30) is None, "its progress is the old incarnation's"
    leader.fetched_by(restarted, 0, now_ms=40)  # the new incarnation's first fetch
    assert leader.proposal(now_ms=40) is None, "behind the high watermark"
    leader.fetched_by(restarted, 5, now_ms=50)
    assert set(leader.proposal(now_ms=50) or ()) == {leader.state.leader, in_sync, restarted}


def test_an_append_after_an_idle_spell_shrinks_nothing_before_the_followers_fetch_it(
    tmp_path: Path,
):
    """The same spell, and the ISR manager's look comes between the append and the followers'
    next fetch (a round trip): they were in sync at its previous look, lag / 2 ago at most."""
    leader = Leader(tmp_path)
    leader.produce(5, now_ms=0)
    for follower in leader.followers:
        leader.fetched_by(follower, 5, now_ms=10)
    for now_ms in range(500, 10_000, 500):
        for follower in leader.followers:
            leader.fetch(follower, {}, now_ms)
        assert leader.proposal(now_ms=now_ms + 1) is None  # a look every 500 ms
    leader.produce(1, now_ms=9_700)
    assert leader.proposal(now_ms=9_702) is None
    assert leader.proposal(now_ms=10_600) is not None, "still silent on it after the lag: out"


# --- a replica moved off and back ---------------------------------------------------------------


def test_a_replica_moved_off_and_back_is_not_proposed_on_its_earlier_fetches():
    """A reassignment takes replica 3 off the partition (its broker deletes its log there) and
    a second one, soon after, puts it back: its new log starts empty, so the progress its old
    log showed must not put it in the ISR before it has fetched again."""
    replica = PartitionReplica(ME)
    replica.become_leader(0, state(isr=(1, 2)), log_end_offset=5, now_ms=0)
    replica.follower_fetched(2, 5, 5, now_ms=10)
    replica.follower_fetched(3, 5, 5, now_ms=10)
    assert replica.advance_high_watermark(5, 1) and replica.high_watermark == 5
    replica.state_changed(PartitionState(0, (1, 2), (1, 2), ME, 0, 1))
    replica.state_changed(PartitionState(0, (1, 2, 3), (1, 2), ME, 0, 2))
    assert replica.isr_to_propose(now_ms=20, log_end_offset=5, **PROPOSAL) is None
    replica.follower_fetched(3, 0, 5, now_ms=30)
    assert replica.isr_to_propose(now_ms=30, log_end_offset=5, **PROPOSAL) is None
    replica.follower_fetched(3, 5, 5, now_ms=40)
    assert replica.isr_to_propose(now_ms=40, log_end_offset=5, **PROPOSAL) == (1, 2, 3)

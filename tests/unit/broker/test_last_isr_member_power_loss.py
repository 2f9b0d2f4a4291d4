"""Goal: one broker's power loss loses no acknowledged record, also when that broker is the last
member of the ISR (KIP-966). RF 3, min.insync.replicas 2, nothing fsynced: a record acknowledged
with acks=all is on all three replicas; the followers are fenced for a moment (they keep
running, and every record) and the ISR shrinks to the leader, whose high watermark then stands
still; the leader loses power, and restarts without its unflushed tail. It used to stay in the
ISR, be elected as soon as it was unfenced, and have the followers truncate the record away.

Method: the replication simulation (replication_sim.py: the controller's decisions, real logs,
produce, fetches) stepped by hand in rounds (metadata applied, one fetch and its answer per
follower, produces settled); the leader's power loss keeps only what it fsynced (nothing), and
it registers again without a clean-shutdown epoch, as after a crash.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.common.record.codec import build_batch
from samsa.services.broker.requests.produce import produce
from samsa.services.controller import control_plane as cp
from samsa.v1 import broker_pb2
from tests.unit.broker.replication_checks import log_records
from tests.unit.broker.replication_producers import Produce
from tests.unit.broker.replication_sim import Simulation


def _round(sim: Simulation) -> None:
    """Every live broker applies the metadata, fetches once and gets its answer."""
    for broker in sim._live():
        sim._apply_metadata(broker)
    for broker in sim._live():
        if broker.fetch is None:
            sim._send_fetch(broker)
    for broker in sim._live():
        if broker.fetch is not None:
            sim._deliver(broker, lost=False)
    sim._settle()
    sim._track_durability()
    sim.now_ms += 10


def _followers_back(sim: Simulation, followers: list[int]) -> None:
    """The fenced followers are back in session (same registration, every record kept)."""
    for follower in followers:
        sim._apply_metadata(sim.brokers[follower])
        sim._heartbeat(follower)


def _values(sim: Simulation, broker_id: int) -> list[bytes]:
    hosted = sim.brokers[broker_id].hosted()
    assert hosted is not None
    return [value for _, value, _ in log_records(hosted, 0, hosted.log.log_end_offset)]


@pytest.mark.parametrize(
    "leader_back_first", [False, True], ids=["followers_first", "leader_first"]
)
def test_the_last_isr_member_back_without_its_tail_does_not_lead_the_others_into_losing_it(
    tmp_path: Path, leader_back_first: bool
) -> None:
    """`leader_back_first`: the restarted leader registers and heartbeats while the followers
    are still fenced (its unclean registration must take it out of the ISR); otherwise the
    followers are back first (one of them is elected on its return)."""
    sim = Simulation(tmp_path, seed=3, broker_power_loss=True)
    try:
        leader_id = sim.state().leader
        followers = [b for b in sim.brokers if b != leader_id]
        for _ in range(5):
            _round(sim)
        leader = sim.brokers[leader_id]
        assert leader.host is not None
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30_000)
        request.topics.add(name="sim").partitions.add(partition=0, records=build_batch([b"acked"]))
        response, waits = produce(leader.host, request, sim.now_ms, internal_write_refusal=None)
        assert response.topics[0].partitions[0].error_code == 0
        sim.produces.append(Produce(leader_id, [b"acked"], waits[0]))
        for _ in range(5):
            _round(sim)
        assert b"acked" in sim.acked.values(), "acknowledged with acks=all on all three"

        for follower in followers:  # fenced for a moment, one after the other
            sim._commit(cp.fence_brokers(sim.image, [follower]))
        _round(sim)
        assert sim.state().isr == (leader_id,)

        leader.fsynced_end = leader.durable_end  # power loss: nothing fsynced survives
        sim._kill(leader)
        sim._commit(cp.fence_brokers(sim.image, [leader_id]))
        if not leader_back_first:
            _followers_back(sim, followers)
        sim._register(leader_id)  # no clean-shutdown file: an unclean restart
        sim._start(leader)
        sim._heartbeat(leader_id)
        if leader_back_first:
            assert sim.state().leader == -1, "it may have lost records: not elected"
            _followers_back(sim, followers)
        for _ in range(10):
            _round(sim)
            for broker in sim._live():
                if sim.image.brokers[broker.broker_id].fenced:
                    sim._heartbeat(broker.broker_id)

        state = sim.state()
        assert state.leader in followers, f"leader {state.leader}, isr {state.isr}"
        for broker_id in sim.brokers:
            assert b"acked" in _values(sim, broker_id), (
                f"broker {broker_id} lacks the acknowledged record; leader {state.leader}"
            )
    finally:
        sim.close()

"""Goal: the leader's replication core (PartitionReplica over LeaderReplication) keeps its
invariants under any interleaving of follower fetches, appends, ISR changes and time. Method:
hypothesis draws a script of steps, a dumb model (the definition of the high watermark) checks
the fast core after every step.

Invariants: the high watermark never decreases; it never passes the leader's log end nor any ISR
member's known end while the ISR meets min.insync.replicas; it never moves while the ISR is below
it; every proposed ISR contains the leader, only replicas, and only eligible new members."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from samsa.metadata.image import PartitionState
from samsa.services.broker.replica.partition_replica import PartitionReplica

REPLICAS = (1, 2, 3)

steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("fetch"), st.sampled_from((2, 3)), st.integers(0, 40)),
        st.tuples(st.just("isr"), st.sampled_from(((1,), (1, 2), (1, 3), (1, 2, 3)))),
        st.tuples(st.just("tick"), st.integers(0, 3000)),
    ),
    max_size=60,
)


@given(steps, st.integers(1, 3))
def test_the_high_watermark_follows_its_definition(script, min_isr) -> None:
    core = PartitionReplica(broker_id=1)
    core.become_leader(0, PartitionState(0, REPLICAS, REPLICAS, 1, 0, 0), 0, now_ms=0)
    leader_end, now, isr, partition_epoch = 0, 0, REPLICAS, 0
    known = {2: -1, 3: -1}
    for step in script:
        before = core.high_watermark
        if step[0] == "append":
            leader_end += step[1]
        elif step[0] == "fetch":
            offset = min(step[2], leader_end)  # a follower never asks past the leader's end
            core.follower_fetched(step[1], offset, leader_end, now)
            known[step[1]] = offset
        elif step[0] == "isr":
            for replica in set(isr) - set(step[1]):
                known[replica] = -1  # one that left counts again only after a new fetch
            isr, partition_epoch = step[1], partition_epoch + 1
            core.state_changed(PartitionState(0, REPLICAS, isr, 1, 0, partition_epoch))
        else:
            now += step[1]
        moved = core.advance_high_watermark(leader_end, min_isr)
        assert core.high_watermark >= before, "the high watermark went backwards"
        assert core.high_watermark <= leader_end
        if len(isr) < min_isr:
            assert not moved and core.high_watermark == before
        elif moved:
            model = min([leader_end] + [known[r] for r in isr if r != 1])
            assert core.high_watermark == model
        proposal = core.isr_to_propose(
            eligible={1, 2},
            now_ms=now,
            lag_max_ms=1000,
            log_end_offset=leader_end,
            replica_fetch_ms={},
        )
        if proposal is not None:
            assert 1 in proposal and set(proposal) <= set(REPLICAS)
            assert 3 not in set(proposal) - set(isr), "an ineligible replica was proposed"

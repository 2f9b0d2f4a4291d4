"""The Node.js client's group member committing while its member epoch moves on
(clients/node/group.js), against a fake coordinator.

Goal: an OffsetCommit refused with STALE_MEMBER_EPOCH (the coordinator moved the member to a
newer epoch, which the member learns at its next heartbeat) is sent again at the new epoch for
the partitions the member still owns, as Kafka's consumer does, instead of failing the commit;
any other refusal still fails it. And leaving waits for an onRevoke callback at most the
rebalance timeout; a revocation whose callback settles at once leaves one heartbeat loop.

Method: a Node script runs a fake CoordinatorLookupService and GroupCoordinatorService (real
gRPC on loopback, in the same process) and a SamsaClient whose member joins and commits. Skipped
when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

# The coordinator assigns t[0] at epoch 1 on join, and answers every later heartbeat (every
# 100 ms) at epoch 2 with the same partition: the epoch moved on while the first commit, sent at
# epoch 1, was on its way. A commit at an epoch below 2 is refused with STALE_MEMBER_EPOCH, one
# of an offset above data.offset_max with INVALID_REQUEST. With data.join_delay_ms, a join is
# answered that much later.
EPOCH_MOVES_ON = """{
  lookup: the_fake_coordinates,
  group: {
    ConsumerGroupHeartbeat(request) {
      const epoch = request.member_epoch === 0 ? 1 : 2;
      const assignment = { topics: [{ topic: 't', partitions: [0] }] };
      const answer = { member_id: request.member_id, member_epoch: epoch,
        heartbeat_interval_ms: 100, assignment };
      if (request.member_epoch !== 0 || !data.join_delay_ms) return answer;
      return new Promise((resolve) => setTimeout(() => resolve(answer), data.join_delay_ms));
    },
    OffsetCommit(request) {
      const t = request.topics[0];
      const code = request.member_epoch < 2 ? 'ERROR_CODE_STALE_MEMBER_EPOCH'
        : Number(t.partitions[0].committed_offset) > data.offset_max ? 'ERROR_CODE_INVALID_REQUEST'
        : 'ERROR_CODE_UNSPECIFIED';
      return { topics: [{ name: t.name, partitions: [{ partition: 0, error_code: code }] }] };
    },
  },
}"""
# Joins, commits `offset` on t[0] at once (at epoch 1), leaves; returns the outcome and the
# epochs the commits were sent at.
JOIN_AND_COMMIT = """
const member = await client.joinGroup('g', ['t']);
const outcome = await member
  .commit([{ topic: 't', partition: 0, offset: data.offset }])
  .then(() => 'committed', (error) => error.code);
const epochs = server_calls
  .filter(([method]) => method === 'OffsetCommit')
  .map(([, request]) => request.member_epoch);
return { outcome, epochs };
"""


def test_a_commit_at_a_stale_member_epoch_is_sent_again_at_the_new_one() -> None:
    data = {"offset": 5, "offset_max": 10}
    outcome = node_with_fake_server(EPOCH_MOVES_ON, JOIN_AND_COMMIT, data, timeoutMs=3000)
    assert outcome == {"outcome": "committed", "epochs": [1, 2]}


def test_other_refusals_fail_the_commit() -> None:
    data = {"offset": 50, "offset_max": 10}
    outcome = node_with_fake_server(EPOCH_MOVES_ON, JOIN_AND_COMMIT, data, timeoutMs=3000)
    assert outcome == {"outcome": "ERROR_CODE_INVALID_REQUEST", "epochs": [1, 2]}


# Joins with an onRevoke that never settles and a 300 ms rebalance timeout, then leaves;
# returns whether onRevoke was called and whether the member left (a leave heartbeat was sent).
LEAVE_PAST_A_STUCK_CALLBACK = """
let called = false;
const member = await client.joinGroup('g', ['t'], {
  rebalanceTimeoutMs: 300,
  onRevoke: () => {
    called = true;
    return new Promise(() => {}); // never settles
  },
});
await member.leave();
const left = server_calls.some(([method, request]) => method === 'ConsumerGroupHeartbeat'
  && request.member_epoch === -1);
return { called, left, owned: member.assignment.length };
"""


def test_leaving_waits_for_the_revoke_callback_at_most_the_rebalance_timeout() -> None:
    # A callback that never settles must not hold leave() (and close()) for ever.
    outcome = node_with_fake_server(EPOCH_MOVES_ON, LEAVE_PAST_A_STUCK_CALLBACK, {}, timeout_s=20)
    assert outcome == {"called": True, "left": True, "owned": 0}


# The coordinator assigns t[0] and t[1] at epoch 1 on join, then takes t[1] away; the member's
# onRevoke never settles, so after data.fenced_after heartbeats the coordinator has removed it
# (FENCED_MEMBER_EPOCH). Rejoining (epoch 0) is answered epoch 3 with t[0] alone.
FENCED_WHILE_REVOKING = """{
  lookup: the_fake_coordinates,
  group: {
    ConsumerGroupHeartbeat(request) {
      const answer = (epoch, partitions) => ({ member_id: request.member_id, member_epoch: epoch,
        heartbeat_interval_ms: 50, assignment: { topics: [{ topic: 't', partitions }] } });
      if (request.member_epoch === -1) return answer(-1, []);
      if (request.member_epoch === 0) {
        return asked_before('ConsumerGroupHeartbeat') === 0 ? answer(1, [0, 1]) : answer(3, [0]);
      }
      const fenced = asked_before('ConsumerGroupHeartbeat') > data.fenced_after;
      if (request.member_epoch === 1 && fenced) {
        return { error_code: 'ERROR_CODE_FENCED_MEMBER_EPOCH', member_id: request.member_id };
      }
      return answer(request.member_epoch, [0]);
    },
  },
}"""
# Joins, waits (up to 5 s) for the member to own what epoch 3 assigns and to have reported it.
REJOIN_PAST_A_STUCK_REVOCATION = """
const member = await client.joinGroup('g', ['t'], {
  rebalanceTimeoutMs: 300,
  onRevoke: () => new Promise(() => {}), // never settles
});
const deadline = Date.now() + 5000;
while ((member.memberEpoch !== 3 || member.ownedChanged) && Date.now() < deadline) await sleep(20);
return { owned: member.assignment.map((tp) => tp.partition), epoch: member.memberEpoch };
"""


def test_a_member_fenced_while_revoking_rejoins_and_owns_its_new_assignment() -> None:
    # KIP-848: a member the coordinator fenced drops everything and rejoins; a revocation it
    # had under way (its callback stuck) must not hold the new assignment back.
    outcome = node_with_fake_server(
        FENCED_WHILE_REVOKING, REJOIN_PAST_A_STUCK_REVOCATION, {"fenced_after": 3}, timeout_s=20
    )
    assert outcome == {"owned": [0], "epoch": 3}


# Assigns t[0] and t[1] on join, t[0] alone afterwards (t[1] is revoked); each answer takes 30 ms,
# and the fake keeps the most heartbeats it had in flight at once.
REVOKES_ONE = """{
  lookup: the_fake_coordinates,
  group: {
    async ConsumerGroupHeartbeat(request) {
      globalThis.inFlight = (globalThis.inFlight || 0) + 1;
      globalThis.mostInFlight = Math.max(globalThis.mostInFlight || 0, globalThis.inFlight);
      await sleep(30);
      globalThis.inFlight -= 1;
      const partitions = request.member_epoch === 0 ? [0, 1] : [0];
      return { member_id: request.member_id, member_epoch: request.member_epoch === -1 ? -1 : 1,
        heartbeat_interval_ms: 200, assignment: { topics: [{ topic: 't', partitions }] } };
    },
  },
}"""
# Joins with an onRevoke that returns at once, heartbeats for 2 s, leaves and waits 500 ms.
REVOKE_AT_ONCE = """
const member = await client.joinGroup('g', ['t'], { onRevoke: () => {} });
await sleep(2000);
const beats = server_calls.filter(([method]) => method === 'ConsumerGroupHeartbeat').length;
await member.leave();
await sleep(500);
const epochs = server_calls.filter(([method]) => method === 'ConsumerGroupHeartbeat')
  .map(([, request]) => request.member_epoch);
const afterLeave = epochs.slice(epochs.indexOf(-1));
return { beats, mostInFlight: globalThis.mostInFlight, afterLeave };
"""


def test_a_revocation_that_settles_at_once_keeps_one_heartbeat_loop() -> None:
    # Such a callback settled between a heartbeat's end and its scheduling the next; both set a
    # timer, and the member heartbeat in two loops for good (twice the rate, two heartbeats in
    # flight at once), one of them going on after leave() had cleared the other's timer.
    outcome = node_with_fake_server(REVOKES_ONE, REVOKE_AT_ONCE, {})
    assert isinstance(outcome, dict)
    assert outcome["mostInFlight"] == 1
    assert outcome["beats"] <= 14  # join, report, then one every 200 ms (20 with two loops)
    assert outcome["afterLeave"] == [-1]


# The member joins (epoch 1, t[0]); its third heartbeat moves it to epoch 2 but the answer comes
# after the client's deadline (lost). The coordinator takes the old epoch 1 again only with
# owned_partitions (the answer that moved the epoch was lost), else fences the member; a rejoin
# is answered epoch 5.
ANSWER_LOST = """{
  lookup: the_fake_coordinates,
  group: {
    ConsumerGroupHeartbeat(request) {
      const n = asked_before('ConsumerGroupHeartbeat');
      const answer = (epoch) => ({ member_id: request.member_id, member_epoch: epoch,
        heartbeat_interval_ms: 50, assignment: { topics: [{ topic: 't', partitions: [0] }] } });
      if (request.member_epoch <= 0) return answer(n === 0 ? 1 : request.member_epoch || 5);
      if (n === 2) return new Promise((resolve) => setTimeout(() => resolve(answer(2)), 800));
      if (request.member_epoch === 1 && n > 2) {
        if (request.owned_partitions) return answer(2);
        return { error_code: 'ERROR_CODE_FENCED_MEMBER_EPOCH', member_id: request.member_id };
      }
      return answer(request.member_epoch);
    },
  },
}"""
# Joins and waits (up to 5 s) for the member's epoch to move past 1; returns it.
EPOCH_AFTER_A_LOST_ANSWER = """
const member = await client.joinGroup('g', ['t']);
const deadline = Date.now() + 5000;
while (member.memberEpoch <= 1 && Date.now() < deadline) await sleep(20);
return { epoch: member.memberEpoch, lost: Boolean(member.lastError) };
"""


def test_a_lost_heartbeat_answer_does_not_fence_the_member() -> None:
    # Kafka's consumer sends every field after a failed heartbeat; with owned_partitions the
    # coordinator takes the old epoch back (KIP-848) instead of fencing the member, which would
    # drop every partition and rejoin.
    outcome = node_with_fake_server(ANSWER_LOST, EPOCH_AFTER_A_LOST_ANSWER, {}, timeoutMs=500)
    assert outcome == {"epoch": 2, "lost": False}


# Starts joining, closes the client once the coordinator has the join heartbeat (its answer on
# its way), and returns how the join ended and the member epochs of the heartbeats sent.
CLOSE_DURING_JOIN = """
const joining = client.joinGroup('g', ['t']).then(() => 'joined', (error) => error.message);
while (asked_before('ConsumerGroupHeartbeat') < 0) await sleep(10);
await client.close();
const outcome = await joining;
const epochs = server_calls
  .filter(([method]) => method === 'ConsumerGroupHeartbeat')
  .map(([, request]) => request.member_epoch);
return { outcome, epochs };
"""


def test_closing_during_a_join_leaves_the_group_again() -> None:
    # close() cannot leave a member it does not know yet: it waits for the join, which then
    # leaves again (epoch -1) instead of holding its partitions until its session expires.
    data = {"join_delay_ms": 200}
    outcome = node_with_fake_server(EPOCH_MOVES_ON, CLOSE_DURING_JOIN, data)
    assert isinstance(outcome, dict)
    assert outcome["epochs"] == [0, -1]
    assert "left again" in outcome["outcome"]


# A coordinator whose group committed 7 on t[0]: an OffsetFetch naming no topic answers every
# committed offset, as coordinator.proto says; one naming partitions answers those.
COMMITTED_SEVEN = """{
  lookup: the_fake_coordinates,
  group: {
    OffsetFetch(request) {
      const asked = request.topics.length > 0 ? request.topics : [{ topic: 't', partitions: [0] }];
      return { topics: asked.map(({ topic, partitions }) => ({ name: topic,
        partitions: partitions.map((partition) => ({ partition, committed_offset: 7 })) })) };
    },
  },
}"""


def test_committed_offsets_of_no_partitions_are_none() -> None:
    # A caller's filtered list that came out empty asks for nothing, not for every offset.
    body = """
    const none = await client.committedOffsets('g', []);
    const one = await client.committedOffsets('g', [{ topic: 't', partition: 0 }]);
    return { none: [...none], one: [...one] };
    """
    outcome = node_with_fake_server(COMMITTED_SEVEN, body, {})
    assert outcome == {"none": [], "one": [["t:0", 7]]}

"""Goal: a heartbeat of the Node client's group member that SamsaClient.groupCall sends again
(the coordinator moved, or did not answer: gRPC UNAVAILABLE, NOT_COORDINATOR) reports the
member's owned partitions, so that the coordinator takes it when the attempt before was applied
and only its answer was lost. Resent as it was — the previous epoch without owned_partitions —
it was answered FENCED_MEMBER_EPOCH (the coordinator takes the previous epoch only with owned
partitions within what it assigned, KIP-848), and the member dropped every partition and
rejoined: a rebalance, and its records since the last commit read again, for a lost answer.

Method: run clients/node/samsa.js under `node` with SamsaClient.groupCall as it is and a fake
`call` in place of the network that answers a join, a heartbeat reporting t-0, then fails the
third heartbeat with UNAVAILABLE once. The requests it sent go through the real coordinator core
(group_harness.py): the third is applied (t grew, so the member's epoch moves), its retry must
be accepted at the new epoch.
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf import json_format
from node_script import needs_node, run_node_script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "coordinator"))

from group_harness import GroupHarness

from samsa.common.errors import ErrorCode
from samsa.v1 import coordinator_pb2 as c

pytestmark = needs_node

SCRIPT = """
const { SamsaClient, GroupMember } = require(process.argv[1]);
const NONE = 'ERROR_CODE_UNSPECIFIED';
const answer = (epoch, partitions) => ({
  error_code: NONE, member_epoch: epoch, heartbeat_interval_ms: 1000,
  assignment: { topics: [{ topic: 't', partitions }] },
});
const sent = [];
const client = Object.create(SamsaClient.prototype);
client.timeoutMs = 5000;
client.clientId = 'node';
client.findCoordinator = async () => 'coordinator:1';
client.call = async (kind, endpoint, method, request) => {
  sent.push(JSON.parse(JSON.stringify(request)));
  if (sent.length <= 2) return answer(1, [0]);
  if (sent.length === 3) {
    const error = new Error('the coordinator went away before answering');
    error.code = 14; // UNAVAILABLE: groupCall tries again
    throw error;
  }
  return answer(2, [0, 1]);
};
(async () => {
  const member = new GroupMember(client, 'g', ['t']);
  member.memberId = 'node-member';
  await member.heartbeat(); // the join
  await member.heartbeat(); // reports t-0
  await member.heartbeat(); // applied, its answer lost, sent again by groupCall
  console.log(JSON.stringify(sent));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_a_retried_heartbeat_reports_what_the_member_owns() -> None:
    sent = run_node_script(SCRIPT, "samsa.js")
    assert len(sent) == 4, sent
    harness = GroupHarness(topics={"t": 1})

    def heartbeat(raw: dict) -> c.ConsumerGroupHeartbeatResponse:
        request = json_format.ParseDict(raw, c.ConsumerGroupHeartbeatRequest())
        return harness.keep(harness.coordinator.heartbeat(request, harness.now_ms, harness.topics))

    assert heartbeat(sent[0]).response.member_epoch == 1
    assert heartbeat(sent[1]).response.member_epoch == 1
    harness.topics["t"] = 2  # the member's target takes t-1 too: its next heartbeat moves it
    applied = heartbeat(sent[2]).response  # applied; the answer never reaches the member
    assert (applied.error_code, applied.member_epoch) == (ErrorCode.NONE, 2)
    retry = sent[3]
    assert retry["member_epoch"] == 1
    assert retry["owned_partitions"] == {"topics": [{"topic": "t", "partitions": [0]}]}, retry
    answer = heartbeat(retry).response
    assert answer.error_code == ErrorCode.NONE, answer.error_message
    assert answer.member_epoch == 2

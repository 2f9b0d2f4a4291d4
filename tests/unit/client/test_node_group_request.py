"""Goal: the Node client's group member sends what coordinator.proto requires of a join:
owned_partitions (empty) on every heartbeat with member_epoch 0, including the rejoin after the
coordinator fenced a member that owned nothing (ConsumerGroupHeartbeatRequest.owned_partitions:
"Required on join (empty)").

Method: run clients/node/group.js under `node` with a fake client whose groupCall records each
request and answers from a script: a join, a FENCED_MEMBER_EPOCH, then the rejoin, whose
request is checked. No server, no gRPC channel.
"""

from __future__ import annotations

from node_script import needs_node, run_node_script

pytestmark = needs_node

SCRIPT = """
const { GroupMember } = require(process.argv[1]);
const NONE = 'ERROR_CODE_UNSPECIFIED';
const answers = [
  { error_code: NONE, member_epoch: 1, heartbeat_interval_ms: 1000, assignment: { topics: [] } },
  { error_code: 'ERROR_CODE_FENCED_MEMBER_EPOCH', member_epoch: 0, heartbeat_interval_ms: 0,
    assignment: null },
  { error_code: NONE, member_epoch: 3, heartbeat_interval_ms: 1000, assignment: { topics: [] } },
];
const sent = [];
const client = {
  clientId: 'test',
  async groupCall(groupId, method, request) {
    // A heartbeat's request is built per attempt (SamsaClient.groupCall).
    const built = typeof request === 'function' ? request() : request;
    sent.push(JSON.parse(JSON.stringify(built)));
    return answers[sent.length - 1];
  },
};
(async () => {
  const member = new GroupMember(client, 'g', ['t']);
  await member.heartbeat(); // the join
  await member.heartbeat(); // fenced: rejoin with epoch 0
  await member.heartbeat(); // the rejoin
  console.log(JSON.stringify(sent));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_every_join_carries_owned_partitions() -> None:
    sent = run_node_script(SCRIPT, "group.js")
    joins = [request for request in sent if request["member_epoch"] == 0]
    assert len(joins) == 2, sent
    for join in joins:
        assert join.get("owned_partitions") == {"topics": []}, join
        assert join["subscription"] == {"topic_names": ["t"]}, join
        assert join["rebalance_timeout_ms"] > 0, join

"""Goal: the Node client's group member sends what coordinator.proto requires of a join:
owned_partitions (empty) on every heartbeat with member_epoch 0, including the rejoin after the
coordinator fenced a member that owned nothing (ConsumerGroupHeartbeatRequest.owned_partitions:
"Required on join (empty)").

Method: run clients/node/group.js under `node` with a fake client whose groupCall records each
request and answers from a script: a join, a FENCED_MEMBER_EPOCH, then the rejoin, whose
request is checked. No server, no gRPC channel.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parents[3] / "clients" / "node"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (NODE_DIR / "node_modules").is_dir(),
    reason="needs `node` and clients/node/node_modules (npm ci --prefix clients/node)",
)

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
    sent.push(JSON.parse(JSON.stringify(request)));
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
    assert NODE is not None
    done = subprocess.run(
        [NODE, "-e", SCRIPT, str(NODE_DIR / "group.js")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    sent = json.loads(done.stdout)
    joins = [request for request in sent if request["member_epoch"] == 0]
    assert len(joins) == 2, sent
    for join in joins:
        assert join.get("owned_partitions") == {"topics": []}, join
        assert join["subscription"] == {"topic_names": ["t"]}, join
        assert join["rebalance_timeout_ms"] > 0, join

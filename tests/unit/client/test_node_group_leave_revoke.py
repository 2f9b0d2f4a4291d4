"""Goal: the Node client's group member calls onRevoke once per partition given up: a leave()
while a revocation's onRevoke runs waits for it, then revokes only what the member still owns.
It called onRevoke again with the partitions the running call had just given up (the
revocation, ending after leave() began, kept them in the assignment), so an application that
commits in onRevoke committed them twice, the second time after giving them up.

Method: run clients/node/group.js under `node` with a fake client that accepts every
heartbeat: the member owns t-0 and t-1, is told to keep only t-1 (onRevoke([t-0]) starts and
waits), leaves meanwhile, then the first call returns.
"""

from __future__ import annotations

from node_script import needs_node, run_node_script

pytestmark = needs_node

SCRIPT = """
const { GroupMember } = require(process.argv[1]);
const calls = [];
let release;
const client = {
  clientId: 'test',
  members: new Set(),
  async groupCall() {
    return { error_code: 'ERROR_CODE_UNSPECIFIED', member_epoch: -1, heartbeat_interval_ms: 0 };
  },
};
const onRevoke = (partitions) => {
  calls.push(partitions.map((tp) => `${tp.topic}-${tp.partition}`));
  if (calls.length === 1) return new Promise((resolve) => { release = resolve; });
  return undefined;
};
(async () => {
  const member = new GroupMember(client, 'g', ['t'], { onRevoke });
  member.assignment = [{ topic: 't', partition: 0 }, { topic: 't', partition: 1 }];
  member.onTarget([{ topic: 't', partition: 1 }]); // revoke t-0: onRevoke runs, and waits
  const leaving = member.leave();
  setTimeout(() => release(), 20);
  await leaving;
  console.log(JSON.stringify({ calls, owned: member.assignment }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_leave_revokes_only_what_a_running_revocation_left() -> None:
    result = run_node_script(SCRIPT, "group.js")
    assert result["calls"] == [["t-0"], ["t-1"]], result
    assert result["owned"] == [], result

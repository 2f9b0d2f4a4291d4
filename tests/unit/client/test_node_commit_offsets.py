"""Goal: the Node client's GroupMember.commit refuses an offset that is not a whole number >= 0
(or a partition that is not one) with a RangeError and sends nothing, as Kafka's
OffsetAndMetadata refuses a negative offset. The proto's encoder sends NaN and undefined as 0,
so commit([{topic, partition, offset: NaN}]) used to commit offset 0: the group rewound to the
log start, silently.

Method: run clients/node/group.js under `node` with a fake client whose groupCall records each
request and accepts every commit; commit bad offsets, then a good one, to a partition the member
owns. No server, no gRPC channel.
"""

from __future__ import annotations

from node_script import needs_node, run_node_script

pytestmark = needs_node

SCRIPT = """
const { GroupMember } = require(process.argv[1]);
const NONE = 'ERROR_CODE_UNSPECIFIED';
const sent = [];
const accepted = (request) => ({
  topics: request.topics.map((t) => ({
    name: t.name,
    partitions: t.partitions.map((p) => ({ partition: p.partition, error_code: NONE })),
  })),
});
const client = {
  clientId: 'test',
  timeoutMs: 1000,
  async groupCall(groupId, method, request) {
    sent.push(request.topics.map((t) => t.partitions.map((p) => p.committed_offset)));
    return accepted(request);
  },
};
(async () => {
  const member = new GroupMember(client, 'g', ['t']);
  member.assignment = [{ topic: 't', partition: 0 }];
  const commit = (offsets) => member.commit(offsets).then(() => 'ok', (error) => error.name);
  const outcomes = [];
  for (const offset of [NaN, undefined, -5, 1.5, '7', 2 ** 53]) {
    outcomes.push(await commit([{ topic: 't', partition: 0, offset }]));
  }
  outcomes.push(await commit(new Map([['t:x', 3]])));
  outcomes.push(await commit(new Map([['t:0', 3]])));
  console.log(JSON.stringify({ outcomes, sent }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_a_commit_of_an_offset_that_is_not_one_sends_nothing() -> None:
    outcome = run_node_script(SCRIPT, "group.js")
    assert outcome == {"outcomes": ["RangeError"] * 7 + ["ok"], "sent": [[[3]]]}

"""Goal: the Node client reads DescribeTopics pages as controller.proto says: each page after
the first asks for min_metadata_offset = the previous answer's status.metadata_offset, so that
no page is older than the one before (a client that switches server between pages must not get
an older image's view of the rest of the topic).

Method: run clients/node/samsa.js under `node` with SamsaClient.callAny replaced by a script
of two pages; check the requests it sent. No server, no gRPC channel.
"""

from __future__ import annotations

from node_script import needs_node, run_node_script

pytestmark = needs_node

SCRIPT = """
const { SamsaClient } = require(process.argv[1]);
const NONE = 'ERROR_CODE_UNSPECIFIED';
const id = Buffer.alloc(16, 7);
const partition = (n) => ({ partition: n, leader: 1, leader_epoch: 0, replicas: [1], isr: [1] });
const pages = [
  { status: { error_code: NONE, metadata_offset: '120' },
    topics: [{ name: 't', error_code: NONE, topic_id: id, partitions: [partition(0)] }],
    broker_endpoints: { 1: 'b:1' }, next_cursor: { topic: 't', partition: 1 } },
  { status: { error_code: NONE, metadata_offset: '125' },
    topics: [{ name: 't', error_code: NONE, topic_id: id, partitions: [partition(1)] }],
    broker_endpoints: { 1: 'b:1' }, next_cursor: null },
];
const client = new SamsaClient('a:1');
const sent = [];
client.callAny = async (kind, method, request) => {
  sent.push(JSON.parse(JSON.stringify(request)));
  return pages[sent.length - 1];
};
(async () => {
  const partitions = await client.describeTopic('t');
  console.log(JSON.stringify({ sent, partitions }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_each_page_is_at_least_as_current_as_the_one_before() -> None:
    out = run_node_script(SCRIPT, "samsa.js")
    assert [p["partition"] for p in out["partitions"]] == [0, 1], out
    first, second = out["sent"]
    assert first["min_metadata_offset"] == 0, first
    assert "cursor" not in first, first
    assert second["cursor"] == {"topic": "t", "partition": 1}, second
    assert second["min_metadata_offset"] == 120, second

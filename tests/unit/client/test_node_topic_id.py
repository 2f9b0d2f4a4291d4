"""Goal: the Node client names the topic's id (KIP-516) in Produce, Fetch and ListOffsets, from the
DescribeTopics it reads for the leader, and a broker's UNKNOWN_TOPIC_ID (the topic was deleted
and created again, and one side's metadata was behind) is retried after describing the topic
again, under the new id. A leader a broker named (KIP-951) for the old topic is not followed
for the new one, whose leader epochs start over below it: the client kept sending to it at the
old epoch, and every call to the partition failed until the new topic's epochs passed it.

Method: run clients/node/samsa.js under `node` with SamsaClient.callAny (metadata) and
SamsaClient.call (the broker) replaced by scripts: the first description shows the old id and
the broker refuses it, the next shows the new one. No server, no gRPC channel.
"""

from __future__ import annotations

from node_script import needs_node, run_node_script

pytestmark = needs_node

SCRIPT = """
const { SamsaClient } = require(process.argv[1]);
const NONE = 'ERROR_CODE_UNSPECIFIED';
const OLD = Buffer.alloc(16, 10);
const NEW = Buffer.alloc(16, 11);
let described = 0;
const partition = { partition: 0, leader: 1, leader_epoch: 0, replicas: [1], isr: [1] };
const client = new SamsaClient('a:1', { timeoutMs: 5000, idempotence: false });
client.callAny = async () => {
  described += 1;
  const id = described === 1 ? OLD : NEW;
  return {
    status: { error_code: NONE, metadata_offset: String(described) },
    topics: [{ name: 't', error_code: NONE, topic_id: id, partitions: [partition] }],
    broker_endpoints: { 1: 'b:1' }, next_cursor: null,
  };
};
const sent = [];
client.call = async (kind, endpoint, method, request) => {
  const topicId = Buffer.from(request.topics[0].topic_id).toString('hex');
  sent.push({ method, topicId });
  const refused = topicId !== NEW.toString('hex');
  const result = refused
    ? { partition: 0, error_code: 'ERROR_CODE_UNKNOWN_TOPIC_ID', error_message: 'another id' }
    : { partition: 0, error_code: NONE, base_offset: '0', high_watermark: '0',
        next_fetch_offset: '0', decoded_records: [], offset: '7' };
  return { topics: [{ name: 't', partitions: [result] }] };
};
(async () => {
  const offset = await client.produce('t', 0, [{ value: 'v' }], 1);
  described = 0;  // the next description shows the old id again, for the fetch
  const fetched = await client.fetch('t', 0, 0, 0);
  described = 0;  // and again for the ListOffsets
  const latest = await client.listOffset('t', 0, 'latest');
  console.log(JSON.stringify({ sent, offset, next: fetched.nextFetchOffset, latest }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_produce_fetch_and_list_offsets_name_the_topic_id_and_retry_under_the_new_one() -> None:
    out = run_node_script(SCRIPT, "samsa.js")
    old, new = "0a" * 16, "0b" * 16
    assert out["sent"] == [
        {"method": "Produce", "topicId": old},
        {"method": "Produce", "topicId": new},
        {"method": "Fetch", "topicId": old},
        {"method": "Fetch", "topicId": new},
        {"method": "ListOffsets", "topicId": old},
        {"method": "ListOffsets", "topicId": new},
    ], out
    assert out["offset"] == 0 and out["next"] == 0 and out["latest"] == 7, out


# Before the re-creation broker 2 leads at epoch 5 while the metadata lags at 3, so the client
# learns it from a refusal (KIP-951); after it, broker 1 leads the new topic at epoch 0, and
# broker 2 refuses naming it.
NAMED_LEADER_SCRIPT = """
const { SamsaClient } = require(process.argv[1]);
const NONE = 'ERROR_CODE_UNSPECIFIED';
let recreated = false;
const client = new SamsaClient('a:1', { timeoutMs: 1500, idempotence: false });
client.callAny = async () => {
  const id = Buffer.alloc(16, recreated ? 11 : 10);
  const epoch = recreated ? 0 : 3;
  const partition = { partition: 0, leader: 1, leader_epoch: epoch, replicas: [1, 2], isr: [1, 2] };
  return {
    status: { error_code: NONE, metadata_offset: '1' },
    topics: [{ name: 't', error_code: NONE, topic_id: id, partitions: [partition] }],
    broker_endpoints: { 1: 'b:1', 2: 'b:2' }, next_cursor: null,
  };
};
const sent = [];
client.call = async (kind, endpoint, method, request) => {
  const epoch = request.topics[0].partitions[0].current_leader_epoch;
  sent.push([endpoint, epoch]);
  const leader = recreated ? { leader_id: 1, leader_epoch: 0 } : { leader_id: 2, leader_epoch: 5 };
  const leads = endpoint === `b:${leader.leader_id}` && epoch === leader.leader_epoch;
  const result = leads
    ? { partition: 0, error_code: NONE, high_watermark: '0', next_fetch_offset: '0',
        decoded_records: [] }
    : { partition: 0, error_code: 'ERROR_CODE_NOT_LEADER_OR_FOLLOWER', current_leader: leader };
  return { topics: [{ name: 't', partitions: [result] }] };
};
(async () => {
  await client.fetch('t', 0, 0, 0);
  recreated = true;
  const after = await client.fetch('t', 0, 0, 0).then(() => 'read', (error) => error.code);
  console.log(JSON.stringify({ after, sent }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_a_leader_named_for_the_old_topic_is_not_followed_for_the_new_one() -> None:
    out = run_node_script(NAMED_LEADER_SCRIPT, "samsa.js")
    assert out == {"after": "read", "sent": [["b:1", 3], ["b:2", 5], ["b:1", 0]]}, out

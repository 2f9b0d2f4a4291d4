"""Goal: the Node client's Positions (clients/node/positions.js) keeps a consumer's positions as
the Python SDK's consumer does (topic_identities.py): the first id a topic is read under is
learnt; a read answered under another id (the topic was deleted and created again) hands out
no record and resets every position of that topic per autoOffsetReset ('earliest', 'latest';
'none' throws and keeps throwing, the positions unmoved); OFFSET_OUT_OF_RANGE resets the
partition the same way (Kafka's consumer); a topic whose partitions were all given up is
forgotten with its id, so the next id it is read under is learnt, not taken for a re-creation.

Method: run Positions under `node` over a stand-in client whose fetch answers from a script
(each answer's topic id and records, or an error code) and whose listOffset answers 0
(earliest) or 40 (latest). No server, no gRPC channel.
"""

from __future__ import annotations

import json

import pytest
from node_script import needs_node, run_node_script

pytestmark = needs_node

SCRIPT = """
const { Positions } = require(process.argv[1]);
const { SamsaError } = require(require('node:path').join(process.argv[1], '..', 'errors.js'));
const data = %s;
const fetched = [];
const client = {
  async fetch(topic, partition, offset) {
    fetched.push([partition, offset]);
    const answer = data.answers.shift();
    if (answer.error) throw new SamsaError(answer.error, 'scripted');
    const records = answer.records.map((n) => ({ offset: offset + n }));
    const nextFetchOffset = offset + answer.records.length;
    return { records, nextFetchOffset, highWatermark: 50, topicId: answer.id };
  },
  async listOffset(topic, partition, spec) {
    return spec === 'earliest' ? 0 : 40;
  },
};
(async () => {
  const positions = new Positions(client, { autoOffsetReset: data.reset });
  positions.set('t', 0, 8);
  positions.set('t', 1, 9);
  const reads = [];
  for (const [partition, forget] of data.reads) {
    if (forget) {
      positions.delete('t', 0);
      positions.delete('t', 1);
      positions.set('t', partition, 5);
    }
    const outcome = await positions.read('t', partition).then(
      (answer) => answer.records.length,
      (error) => error.code,
    );
    reads.push([outcome, positions.get('t', 0) ?? null, positions.get('t', 1) ?? null]);
  }
  console.log(JSON.stringify({ reads, fetched }));
})().catch((error) => { console.error(error); process.exit(1); });
"""
OLD, NEW, OTHER = "0a" * 16, "0b" * 16, "0c" * 16


def under(topic_id: str, count: int) -> dict:
    """A fetch answer of `count` records of the topic whose id is `topic_id`."""
    return {"id": topic_id, "records": list(range(count))}


def run(reset: str, answers: list[dict], reads: list[list]) -> dict:
    data = {"reset": reset, "answers": answers, "reads": reads}
    return run_node_script(SCRIPT % json.dumps(data), "positions.js")


@pytest.mark.parametrize(("reset", "start"), [("earliest", 0), ("latest", 40)])
def test_a_topic_created_again_resets_all_its_positions(reset: str, start: int) -> None:
    answers = [under(OLD, 2), under(NEW, 1), under(NEW, 1)]
    out = run(reset, answers, [[0, False], [1, False], [1, False]])
    # Two records of the old topic (the position is the caller's to move); then the new id:
    # nothing handed out, both partitions start again; then partition 1 reads from there.
    assert out["reads"] == [[2, 8, 9], [0, start, start], [1, start, start]]
    assert out["fetched"] == [[0, 8], [1, 9], [1, start]]


def test_with_none_a_topic_created_again_throws_and_keeps_throwing() -> None:
    answers = [under(OLD, 1), under(NEW, 1), under(NEW, 1)]
    out = run("none", answers, [[0, False], [0, False], [1, False]])
    code = "ERROR_CODE_OFFSET_OUT_OF_RANGE"
    assert out["reads"] == [[1, 8, 9], [code, 8, 9], [code, 8, 9]]


def test_an_offset_out_of_range_resets_the_partition() -> None:
    answers = [{"error": "ERROR_CODE_OFFSET_OUT_OF_RANGE"}, under(OLD, 1)]
    out = run("earliest", answers, [[1, False], [1, False]])
    assert out["reads"] == [[0, 8, 0], [1, 8, 0]]
    assert out["fetched"] == [[1, 9], [1, 0]]


def test_a_topic_given_up_and_read_again_learns_its_id_anew() -> None:
    answers = [under(OLD, 1), under(OTHER, 2)]
    out = run("earliest", answers, [[0, False], [1, True]])
    assert out["reads"] == [[1, 8, 9], [2, None, 5]]

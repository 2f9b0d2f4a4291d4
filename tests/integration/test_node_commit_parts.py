"""The Node.js client's OffsetCommit and OffsetFetch for more partitions than one request may
name (clients/node/group.js commit, clients/node/samsa.js committedOffsets).

Goal: the coordinator refuses a request naming more than request_partitions_max partitions, or
topic entries, with RESOURCE_EXHAUSTED (services/coordinator/servicer.py); the Node client sent
every partition of a commit, and of an offset read, in one request, so a member owning more
(or an admin reading a large group's offsets) failed every time. Now a commit goes in several
requests of at most the limit, one after the other in the order given, stops at the first
refused partition and reports it as before; a STALE_MEMBER_EPOCH resends only the request it
refused; commits run one after another, so an older commit's later request never lands over a
newer commit's; an offset read goes in parts too and the answers are merged.

A commit whose records would not fit the one batch of __consumer_offsets they are written as is
refused too (RESOURCE_EXHAUSTED, group_offsets.commit_size_problem): 4,000 partitions of a
200-character topic are 1.1 MB, under the count limit, so a group of a few thousand partitions
with long names failed every commit. Now each request also stays under the coordinator's bound
on bytes, which group.js computes as the coordinator does, from numbers it copies from
common/limits.py (checked here).

Method: a Node script runs a fake CoordinatorLookupService and GroupCoordinatorService (real
gRPC on loopback, in the same process) that refuses requests as the coordinator does, with the
coordinator's own limit (samsa.common.limits), and a SamsaClient whose member owns more
partitions than that. For the byte bound, the fake is in Python (fake_offsets_coordinator.py),
so that it refuses with the coordinator's own commit_size_problem. Skipped when `node` or
clients/node/node_modules is missing.
"""

from __future__ import annotations

import re

import pytest
from fake_offsets_coordinator import FakeOffsetsCoordinator, serving
from node_helpers import NODE_DIR, node_script, node_with_fake_server, skip_module_without_node

from samsa.common import limits

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

LIMIT = limits.request_partitions_max
# Topic a with LIMIT partitions and b with LIMIT // 2 + 1: two requests' worth.
SIZES = {"a": LIMIT, "b": LIMIT // 2 + 1}

# Assigns every partition of data.sizes at data.epoch (a heartbeat every 100 ms) and keeps
# committed offsets. A request naming more than data.limit partitions or topic entries is
# refused with RESOURCE_EXHAUSTED, as the coordinator refuses it; a commit below the current
# epoch is refused with STALE_MEMBER_EPOCH, and data.refused ("topic:partition") with
# INVALID_REQUEST. With data.move_epoch, the epoch moves to 2 once the first
# OffsetCommit arrived; with data.first_answer_delay_ms, its answer comes that much later.
COORDINATOR = """(() => {
  const refuseLarge = (topics) => {
    const partitions = topics.reduce((sum, t) => sum + t.partitions.length, 0);
    for (const [number, what] of [[partitions, 'partitions'], [topics.length, 'topic entries']]) {
      if (number > data.limit) {
        const error = new Error(`${number} ${what} in one request; send at most ${data.limit}`);
        const code = grpc.status.RESOURCE_EXHAUSTED;
        throw Object.assign(error, { code, details: error.message });
      }
    }
  };
  return {
    lookup: the_fake_coordinates,
    group: {
      ConsumerGroupHeartbeat(request) {
        const topics = Object.entries(data.sizes).map(([topic, size]) =>
          ({ topic, partitions: [...Array(size).keys()] }));
        return { member_id: request.member_id, member_epoch: data.epoch,
          heartbeat_interval_ms: 100, assignment: { topics } };
      },
      async OffsetCommit(request) {
        refuseLarge(request.topics);
        const stale = request.member_epoch < data.epoch;
        const topics = request.topics.map((t) => ({
          name: t.name,
          partitions: t.partitions.map((p) => {
            const key = `${t.name}:${p.partition}`;
            const code = stale ? 'ERROR_CODE_STALE_MEMBER_EPOCH'
              : key === data.refused ? 'ERROR_CODE_INVALID_REQUEST'
              : 'ERROR_CODE_UNSPECIFIED';
            if (code === 'ERROR_CODE_UNSPECIFIED') data.committed[key] = Number(p.committed_offset);
            return { partition: p.partition, error_code: code, error_message: 'refused' };
          }),
        }));
        const first = asked_before('OffsetCommit') === 0;
        if (first && data.move_epoch) data.epoch = 2;
        if (!first || !data.first_answer_delay_ms) return { topics };
        return sleep(data.first_answer_delay_ms).then(() => ({ topics }));
      },
      async OffsetFetch(request) {
        refuseLarge(request.topics);
        const topics = request.topics.map((t) => ({
          name: t.topic,
          partitions: t.partitions.map((partition) => ({ partition,
            committed_offset: data.committed[`${t.topic}:${partition}`] ?? -1 })),
        }));
        return { topics };
      },
    },
  };
})()"""
# The member joins and commits data.offset (plus the partition number) for every partition it
# owns, in topic order; returns the outcome, each OffsetCommit's epoch and its partitions
# (as "topic:first..topic:last" and a count), and the offsets committedOffsets reads back.
COMMIT_ALL = """
const member = await client.joinGroup('g', Object.keys(data.sizes));
const offsets = member.assignment.map(({ topic, partition }) =>
  ({ topic, partition, offset: data.offset + partition }));
const outcome = await member.commit(offsets).then(() => 'committed', (error) => error.message);
const read = await client.committedOffsets('g', member.assignment);
const wrong = offsets.filter((o) => read.get(`${o.topic}:${o.partition}`) !== o.offset);
const fetches = server_calls.filter(([method]) => method === 'OffsetFetch').map(([, r]) =>
  r.topics.reduce((sum, t) => sum + t.partitions.length, 0));
return { outcome, commits: commitsSent(), fetches, read: read.size,
  wrong: wrong.slice(0, 3).map((o) => `${o.topic}:${o.partition}`) };
"""
COMMITS_SENT = """
const commitsSent = () => server_calls.filter(([method]) => method === 'OffsetCommit')
  .map(([, r]) => {
    const names = r.topics.flatMap((t) => t.partitions.map((p) => `${t.name}:${p.partition}`));
    return [r.member_epoch, `${names[0]}..${names[names.length - 1]}`, names.length];
  });
"""


def node_with_limit(body: str, **data: object) -> object:
    """BODY against COORDINATOR, which refuses as the coordinator does past LIMIT."""
    data = {"limit": LIMIT, "sizes": SIZES, "epoch": 1, "committed": {}, "offset": 100} | data
    body = COMMITS_SENT + body
    return node_with_fake_server(COORDINATOR, body, data, timeout_s=50, timeoutMs=5000)


def test_a_commit_and_a_read_over_the_limit_go_in_parts_in_order() -> None:
    outcome = node_with_limit(COMMIT_ALL)
    last_b = SIZES["b"] - 1
    assert outcome == {
        "outcome": "committed",
        "commits": [[1, f"a:0..a:{LIMIT - 1}", LIMIT], [1, f"b:0..b:{last_b}", SIZES["b"]]],
        "fetches": [LIMIT, SIZES["b"]],
        "read": LIMIT + SIZES["b"],
        "wrong": [],
    }


def test_a_refused_partition_stops_the_commit_and_is_reported_as_before() -> None:
    # The parts after the refused one are not sent: the commit failed, as one request would.
    sizes = {"a": LIMIT, "b": LIMIT, "c": 1}
    outcome = node_with_limit(COMMIT_ALL, sizes=sizes, refused="b:7")
    assert isinstance(outcome, dict)
    assert outcome["outcome"] == ("ERROR_CODE_INVALID_REQUEST: commit for group g: b[7] refused")
    assert [count for _, _, count in outcome["commits"]] == [LIMIT, LIMIT]


def test_a_stale_member_epoch_sends_again_only_the_part_it_refused() -> None:
    # The first part is answered at epoch 1, then the epoch moves on: the second part, refused
    # at epoch 1, goes again at epoch 2 once a heartbeat brought it; the first is not resent.
    outcome = node_with_limit(COMMIT_ALL, move_epoch=True)
    assert isinstance(outcome, dict)
    last_b = SIZES["b"] - 1
    assert outcome["outcome"] == "committed"
    assert outcome["commits"] == [
        [1, f"a:0..a:{LIMIT - 1}", LIMIT],
        [1, f"b:0..b:{last_b}", SIZES["b"]],
        [2, f"b:0..b:{last_b}", SIZES["b"]],
    ]
    assert outcome["wrong"] == []


# Commits offset 1, then at once offset 2, of every partition the member owns; returns the
# offsets read back (each distinct once) and the ranges of the OffsetCommits in arrival order.
TWO_COMMITS = """
const member = await client.joinGroup('g', Object.keys(data.sizes));
const commit = (offset) =>
  member.commit(member.assignment.map(({ topic, partition }) => ({ topic, partition, offset })));
await Promise.all([commit(1), commit(2)]);
const read = await client.committedOffsets('g', member.assignment);
return { offsets: [...new Set(read.values())], commits: commitsSent().map(([, range]) => range) };
"""


def test_commits_run_one_after_the_other() -> None:
    # The first commit's first answer is slow: were the second commit sent meanwhile, its parts
    # would land before the first commit's second part, which would overwrite them with the
    # older offset 1.
    outcome = node_with_limit(TWO_COMMITS, first_answer_delay_ms=300)
    a_range, b_range = f"a:0..a:{LIMIT - 1}", f"b:0..b:{SIZES['b'] - 1}"
    assert outcome == {"offsets": [2], "commits": [a_range, b_range, a_range, b_range]}


# The member joins and commits data.offset plus the partition number for every partition it
# owns, in order, then reads them back; returns the outcome and the offsets read that differ.
COMMIT_AND_READ = """
const member = await client.joinGroup(data.group, Object.keys(data.sizes));
const offsets = member.assignment.map(({ topic, partition }) =>
  ({ topic, partition, offset: data.offset + partition }));
const outcome = await member.commit(offsets).then(() => 'committed', (error) => error.message);
const read = await client.committedOffsets(data.group, member.assignment);
const wrong = offsets.filter((o) => read.get(`${o.topic}:${o.partition}`) !== o.offset);
return { outcome, owned: offsets.length, wrong: wrong.length };
"""


def test_a_commit_over_one_batch_goes_in_parts_under_the_bound_in_order() -> None:
    topic, count = "t" * 200, 4_000
    fake = FakeOffsetsCoordinator({topic: count})
    data = {"group": "consumer-group-of-the-pipeline", "sizes": fake.sizes, "offset": 10**9}
    with serving(fake) as endpoint:
        outcome = node_script(endpoint, topic, COMMIT_AND_READ, data, timeout_s=50)
    assert fake.refusals == []
    assert outcome == {"outcome": "committed", "owned": count, "wrong": 0}
    parts = [partitions for method, partitions in fake.requests if method == "OffsetCommit"]
    assert len(parts) == 2
    assert [tp for part in parts for tp in part] == [(topic, p) for p in range(count)]


def test_group_js_copies_the_coordinators_limits() -> None:
    # group.js cannot import common/limits.py: its copies must stay equal to the originals.
    source = (NODE_DIR / "group.js").read_text()
    found = re.findall(r"^const ([A-Z_]+) = ([0-9]+);", source, re.MULTILINE)
    copied = {name: int(value) for name, value in found}
    assert copied == {
        "REQUEST_PARTITIONS_MAX": limits.request_partitions_max,
        "COMMIT_RECORD_OVERHEAD_BYTES_MAX": limits.offset_commit_record_overhead_bytes_max,
        "COMMIT_BATCH_OVERHEAD_BYTES": limits.offset_commit_batch_overhead_bytes,
        "COMMIT_BATCH_BYTES_MAX": limits.offset_commit_batch_bytes_max,
    }

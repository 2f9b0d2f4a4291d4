"""What the Node.js client (clients/node/samsa.js) makes of metadata and leader answers, against
a fake server.

Goal: the client reads a topic's every partition, however many pages DescribeTopics answers
them in (at most partition_limit per answer, 2,000 by default), so that a topic of more
partitions can be written and read whole and keys are partitioned over the true count; and it
names the leader epoch its metadata gave with Fetch and ListOffsets (KIP-320), so that a
deposed leader not yet told refuses instead of answering from its stale log; a partition
without a leader stops only its own reads and writes, not the topic's other partitions; a
bootstrap server that hangs costs one deadline, not one per metadata read; and the leader a
refusal names (KIP-951) is followed while the metadata still names an older one.

Method: a Node script runs a fake ControllerService and BrokerService (real gRPC on loopback, in
the same process) that answer as a server does, and a SamsaClient against them. Skipped when
`node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

# A controller whose one topic has `data.partitions` partitions, all led by broker 1 (the fake
# itself) at leader epoch 3; it answers at most partition_limit of them (its default 2,000 when
# unset, never more than its maximum, 1,000) from the request's cursor, and the cursor after.
PAGED_CONTROLLER = """{
  controller: {
    DescribeTopics(request) {
      const limit = Math.min(request.partition_limit || 2000, 1000);
      const first = request.cursor ? request.cursor.partition : 0;
      const end = Math.min(data.partitions, first + limit);
      const partitions = [];
      for (let p = first; p < end; p++) {
        partitions.push({ partition: p, leader: 1, leader_epoch: 3, replicas: [1], isr: [1] });
      }
      const name = request.names[0];
      const topic = { name, topic_id: Buffer.alloc(16, 7), partitions };
      const answer = { topics: [topic], broker_endpoints: { 1: endpoint } };
      if (end < data.partitions) answer.next_cursor = { topic: name, partition: end };
      return answer;
    },
  },
}"""


def test_a_topic_answered_in_pages_is_read_whole() -> None:
    body = """
    const partitions = await client.describeTopic('big');
    const last = await client.leaderOf('big', data.partitions - 1);
    return { count: partitions.length, last: last.partition, epoch: last.leaderEpoch };
    """
    outcome = node_with_fake_server(PAGED_CONTROLLER, body, {"partitions": 2500}, timeoutMs=2000)
    assert outcome == {"count": 2500, "last": 2499, "epoch": 3}


# The controller names the fake (broker 1) leader at epoch 4, but the fake is the leader deposed
# at epoch 3, not yet told: for its first `data.stale_answers` requests it answers from its
# stale log (record "stale" at offset 9, log start 9) unless the request names an epoch above 3,
# which it refuses with UNKNOWN_LEADER_EPOCH (Kafka's rule); then it has caught up (epoch 4,
# record "fresh" at offset 5, log start 5).
DEPOSED_LEADER = """{
  controller: {
    DescribeTopics: (request) => one_partition_answer(request, 4),
  },
  broker: {
    Fetch(request) {
      const asked = request.topics[0].partitions[0];
      const answer = (fields) => partition_answer(
        request, { high_watermark: 10, next_fetch_offset: 10, ...fields },
      );
      const stale = asked_before('Fetch') < data.stale_answers;
      if (stale && asked.current_leader_epoch > 3) {
        return answer({ error_code: 'ERROR_CODE_UNKNOWN_LEADER_EPOCH' });
      }
      const [offset, value] = stale ? [9, 'stale'] : [5, 'fresh'];
      return answer({ decoded_records: [{ offset, timestamp_ms: 1, value: Buffer.from(value) }] });
    },
    ListOffsets(request) {
      const asked = request.topics[0].partitions[0];
      const answer = (fields) => partition_answer(request, { leader_epoch: 4, ...fields });
      const stale = asked_before('ListOffsets') < data.stale_answers;
      if (stale && asked.current_leader_epoch > 3) {
        return answer({ error_code: 'ERROR_CODE_UNKNOWN_LEADER_EPOCH', offset: -1 });
      }
      return answer({ offset: stale ? 9 : 5 });
    },
  },
}"""


def test_a_deposed_leader_not_yet_told_is_not_read() -> None:
    body = """
    const fetched = await client.fetch('moved', 0, 0, 0);
    const earliest = await client.listOffset('moved', 0, 'earliest');
    const epochs = server_calls
      .filter(([method]) => method === 'Fetch' || method === 'ListOffsets')
      .map(([method, request]) => request.topics[0].partitions[0].current_leader_epoch);
    return {
      values: fetched.records.map((r) => r.value.toString()),
      earliest,
      epochs: [...new Set(epochs)],
    };
    """
    outcome = node_with_fake_server(DEPOSED_LEADER, body, {"stale_answers": 2}, timeoutMs=5000)
    assert outcome == {"values": ["fresh"], "earliest": 5, "epochs": [4]}


# Partition 0 is led by the fake at epoch 1, partition 1 is offline (its one replica's broker
# is down); the leader answers every fetch with one record and every produce at offset 7.
ONE_PARTITION_OFFLINE = """{
  controller: {
    DescribeTopics: (request) => topic_answer(request, [
      { partition: 0, leader: 1, leader_epoch: 1, replicas: [1], isr: [1] },
      { partition: 1, leader: -1, leader_epoch: 1, replicas: [2], isr: [2] },
    ]),
  },
  broker: {
    Fetch(request) {
      const record = { offset: 0, timestamp_ms: 1, value: Buffer.from('up') };
      return partition_answer(
        request, { high_watermark: 1, next_fetch_offset: 1, decoded_records: [record] },
      );
    },
    Produce: (request) => partition_answer(request, { base_offset: 7 }),
  },
}"""


def test_an_offline_partition_does_not_stop_the_others() -> None:
    body = """
    const fetched = await client.fetch('half', 0, 0, 0);
    const offset = await client.produce('half', 0, [{ value: 'v' }], -1);
    const offline = await client.fetch('half', 1, 0, 0).then(() => null, (error) => error.code);
    const partitions = await client.describeTopic('half');
    return {
      values: fetched.records.map((r) => r.value.toString()),
      offset,
      offline,
      leaders: partitions.map((p) => p.leader),
    };
    """
    outcome = node_with_fake_server(
        ONE_PARTITION_OFFLINE, body, {}, timeoutMs=1000, idempotence=False
    )
    assert outcome == {
        "values": ["up"],
        "offset": 7,
        "offline": "ERROR_CODE_LEADER_NOT_AVAILABLE",
        "leaders": [1, -1],
    }


def test_a_hung_bootstrap_server_is_waited_for_once() -> None:
    # The first bootstrap server accepts calls and never answers (a paused broker); the second
    # is the fake. Each of three reads looks its leader up: the hung server must cost one
    # deadline, not one per read.
    body = """
    const { SamsaClient } = require('./samsa');
    let hungCalls = 0;
    const hung = new grpc.Server();
    hung.addService(SERVICES.controller.service, {
      DescribeTopics() {
        hungCalls += 1; // never answered
      },
    });
    const port = await new Promise((resolve, reject) => {
      const credentials = grpc.ServerCredentials.createInsecure();
      const bound = (error, number) => (error ? reject(error) : resolve(number));
      hung.bindAsync('127.0.0.1:0', credentials, bound);
    });
    const both = new SamsaClient([`127.0.0.1:${port}`, endpoint], { timeoutMs: 500 });
    try {
      for (let read = 0; read < 3; read++) await both.fetch('half', 0, 0, 0);
    } finally {
      await both.close();
      hung.forceShutdown();
    }
    return { hungCalls };
    """
    outcome = node_with_fake_server(ONE_PARTITION_OFFLINE, body, {})
    assert outcome == {"hungCalls": 1}


# The metadata is stale for good (a broker cut off from the controllers answers it): it names
# broker 1 leader at epoch 3. The leadership moved to broker 2 at epoch 4 (both are the fake):
# a request at epoch 3 is refused NOT_LEADER_OR_FOLLOWER naming broker 2 at epoch 4 (KIP-951),
# one at epoch 4 is served.
STALE_METADATA = """{
  controller: {
    DescribeTopics: (request) => topic_answer(
      request,
      [{ partition: 0, leader: 1, leader_epoch: 3, replicas: [1, 2], isr: [2] }],
      [1, 2],
    ),
  },
  broker: {
    Fetch(request) {
      const asked = request.topics[0].partitions[0];
      const result = asked.current_leader_epoch === 4
        ? { high_watermark: 1, next_fetch_offset: 1,
            decoded_records: [{ offset: 0, timestamp_ms: 1, value: Buffer.from('moved') }] }
        : { error_code: 'ERROR_CODE_NOT_LEADER_OR_FOLLOWER',
            current_leader: { leader_id: 2, leader_epoch: 4 } };
      return partition_answer(request, result);
    },
    Produce(request) {
      const result = asked_before('Produce') > 0 ? { base_offset: 1 }
        : { error_code: 'ERROR_CODE_FENCED_LEADER_EPOCH', base_offset: -1,
            current_leader: { leader_id: 2, leader_epoch: 5 } };
      return partition_answer(request, result);
    },
  },
}"""


def test_the_leader_a_broker_names_is_taken_over_stale_metadata() -> None:
    body = """
    const fetched = await client.fetch('moved', 0, 0, 0);
    await client.produce('moved', 0, [{ value: 'v' }], 1);
    const fetches = server_calls.filter(([method]) => method === 'Fetch').length;
    const leader = await client.leaderOf('moved', 0);
    return {
      values: fetched.records.map((r) => r.value.toString()),
      fetches,
      leader: [leader.leader, leader.leaderEpoch],
    };
    """
    outcome = node_with_fake_server(STALE_METADATA, body, {}, timeoutMs=2000, idempotence=False)
    assert outcome == {"values": ["moved"], "fetches": 2, "leader": [2, 5]}

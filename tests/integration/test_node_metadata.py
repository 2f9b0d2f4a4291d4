"""What the Node.js client (clients/node/samsa.js) makes of metadata and leader answers, against
a fake server.

Goal: the client reads a topic's every partition, however many pages DescribeTopics answers
them in (at most partition_limit per answer, 2,000 by default), so that a topic of more
partitions can be written and read whole and keys are partitioned over the true count.

Method: a Node script runs a fake ControllerService (real gRPC on loopback, in the same
process) that pages its answers as a server does, and a SamsaClient against it. Skipped when
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

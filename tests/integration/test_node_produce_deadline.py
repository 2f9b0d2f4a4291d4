"""The Node.js client's idempotent produce when the leader does not answer in time
(clients/node/producer.js), against a fake server.

Goal: an attempt that passes its gRPC deadline (DEADLINE_EXCEEDED) may have been written, and is
sent again with the same producer id, epoch and base sequence (the leader dedupes it), as Kafka's
idempotent producer retries a timed-out request within delivery.timeout.ms; the call fails only
once deliveryTimeoutMs is spent (its last attempt's deadline cut short to it), and then the
client bumps its producer epoch (KIP-360), so the next call starts under the next epoch from
sequence 0 instead of reusing a sequence that may be in the log.

Method: a Node script runs a fake ControllerService and BrokerService (real gRPC on loopback, in
the same process) whose leader holds Produce calls unanswered (for a while, or until told), and
a SamsaClient producing. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

# One partition led by the fake; InitProducerId hands out 100, 101, ... The leader answers a
# Produce at offset 0, after data.slow_ms for the first one; while globalThis.hung is set it
# answers none.
SLOW_LEADER = """{
  controller: { DescribeTopics: (request) => one_partition_answer(request) },
  broker: {
    InitProducerId() {
      return { producer_id: String(100 + asked_before('InitProducerId')), producer_epoch: 0 };
    },
    async Produce(request) {
      if (globalThis.hung) return new Promise(() => {});
      if (asked_before('Produce') === 0) await sleep(data.slow_ms || 0);
      return partition_answer(request, { base_offset: '0' });
    },
  },
}"""
# What the fake was sent: [producer id, producer epoch, base sequence] of each Produce.
SENT = """
const sent = () => server_calls.filter(([method]) => method === 'Produce')
  .map(([, request]) => request.topics[0].partitions[0])
  .map((p) => [p.producer_id, p.producer_epoch, p.base_sequence]);
const outcome = (promise) =>
  promise.then((offset) => ({ offset }), (error) => ({ error: error.code }));
"""


def test_an_attempt_past_its_deadline_is_sent_again_with_its_sequence() -> None:
    # The call's deadline is 2 * timeoutMs = 1 s; the first answer comes after 1.5 s.
    body = (
        SENT
        + "return { first: await outcome(client.produce('t', 0, [{ value: 'v' }])), sent: sent() };"
    )
    outcome = node_with_fake_server(SLOW_LEADER, body, {"slow_ms": 1500}, timeoutMs=500)
    assert outcome == {"first": {"offset": 0}, "sent": [["100", 0, 0], ["100", 0, 0]]}


def test_a_call_fails_at_its_delivery_timeout_and_the_next_takes_the_next_epoch() -> None:
    body = (
        SENT
        + """
    globalThis.hung = true;
    const started = Date.now();
    const first = await outcome(client.produce('t', 0, [{ value: 'lost' }]));
    const elapsedMs = Date.now() - started;
    const attempts = sent();
    globalThis.hung = false;
    const second = await outcome(client.produce('t', 0, [{ value: 'next' }]));
    const inTime = elapsedMs >= 1000 && elapsedMs < 1500;
    return { first, inTime, attempts, second, last: sent().pop() };
    """
    )
    outcome = node_with_fake_server(SLOW_LEADER, body, {}, timeoutMs=300, deliveryTimeoutMs=1000)
    attempts = outcome.pop("attempts")
    assert len(attempts) >= 2 and all(a == ["100", 0, 0] for a in attempts), attempts
    assert outcome == {
        "first": {"error": 4},  # gRPC DEADLINE_EXCEEDED
        "inTime": True,
        "second": {"offset": 0},
        "last": ["100", 1, 0],
    }


def test_a_delivery_timeout_shorter_than_one_attempt_is_refused() -> None:
    body = """
    const { SamsaClient } = require('./samsa');
    try {
      new SamsaClient(endpoint, { timeoutMs: 1000, deliveryTimeoutMs: 1500 });
      return null;
    } catch (error) {
      return error.name;
    }
    """
    assert node_with_fake_server(SLOW_LEADER, body, {}) == "RangeError"

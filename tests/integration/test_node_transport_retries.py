"""What the Node.js client retries of gRPC statuses (clients/node errors.js TRANSIENT_STATUSES,
producer.js UNANSWERED), against a fake server.

Goal: a call that got no answer is asked again as the Python SDK asks it again: cut off by a
server stopping (CANCELLED) or killed mid-call (INTERNAL), as well as unreachable (UNAVAILABLE),
for InitProducerId, an idempotent Produce (the same sequence: the leader dedupes it), a Fetch
and a ConsumerGroupHeartbeat (the member keeps its partitions); a produce without a sequence
sends a cut-off call again (README: a retry may store it twice) but not one past its deadline
(DEADLINE_EXCEEDED, the Python SDK's REQUEST_TIMED_OUT, which such a produce leaves to the
caller); and a request refused as sent (RESOURCE_EXHAUSTED, INVALID_ARGUMENT: over a limit or
malformed, refused again if sent again) is not sent again, as in the Python SDK.

Method: a Node script runs a fake ControllerService, BrokerService and group coordinator (real
gRPC on loopback, in the same process) whose data.method fails its first call with gRPC status
data.status, and a SamsaClient calling it. Skipped when `node` or clients/node/node_modules is
missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, INVALID_ARGUMENT = 1, 2, 4, 3
RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE = 8, 13, 14

# One partition led by the fake, whose data.method fails its first call with data.status.
CUTTING_OFF = """{
  controller: { DescribeTopics: (request) => one_partition_answer(request) },
  lookup: the_fake_coordinates,
  broker: {
    async InitProducerId() {
      if (data.method === 'InitProducerId' && asked_before('InitProducerId') === 0) {
        throw { code: data.status, details: 'cut off' };
      }
      return { producer_id: '100', producer_epoch: 0 };
    },
    async Produce(request) {
      if (data.method === 'Produce' && asked_before('Produce') === 0) {
        throw { code: data.status, details: 'cut off' };
      }
      return partition_answer(request, { base_offset: '0' });
    },
    async Fetch(request) {
      if (data.method === 'Fetch' && asked_before('Fetch') === 0) {
        throw { code: data.status, details: 'cut off' };
      }
      return partition_answer(request, { next_fetch_offset: '0', high_watermark: '0' });
    },
  },
  group: {
    async ConsumerGroupHeartbeat(request) {
      const nth = asked_before('ConsumerGroupHeartbeat');
      if (data.method === 'ConsumerGroupHeartbeat' && nth === 1) {
        throw { code: data.status, details: 'cut off' };
      }
      const assignment = { topics: [{ topic: 't', partitions: [0] }] };
      const epoch = request.member_epoch === -1 ? -1 : 1;
      return {
        member_id: request.member_id, member_epoch: epoch, heartbeat_interval_ms: 100, assignment,
      };
    },
  },
}"""
# Runs data.call; returns its outcome and how many data.method requests were sent.
CALL = """
const calls = {
  idempotent: () => client.produce('t', 0, [{ value: 'v' }]),
  plain: () => client.produce('t', 0, [{ value: 'v' }], 1),
  fetch: () => client.fetch('t', 0, 0, 0),
  heartbeat: async () => {
    const member = await client.joinGroup('g', ['t']);
    while (asked_before('ConsumerGroupHeartbeat') < 3 && !member.error) await sleep(20);
    return member.error ? Promise.reject(member.error) : member.assignment.length;
  },
};
const outcome = await calls[data.call]().then(
  () => 'done',
  (error) => ({ code: error.code }),
);
return { outcome, sent: server_calls.filter(([method]) => method === data.method).length };
"""
CALLS = [
    ("idempotent", "InitProducerId"),
    ("idempotent", "Produce"),
    ("fetch", "Fetch"),
    ("plain", "Produce"),
]


@pytest.mark.parametrize("status", [CANCELLED, INTERNAL, UNAVAILABLE])
@pytest.mark.parametrize(("call", "method"), CALLS)
def test_a_call_cut_off_is_sent_again(call: str, method: str, status: int) -> None:
    data = {"call": call, "method": method, "status": status}
    outcome = node_with_fake_server(CUTTING_OFF, CALL, data, timeoutMs=2000)
    assert outcome == {"outcome": "done", "sent": 2}


@pytest.mark.parametrize("status", [CANCELLED, INTERNAL, UNKNOWN, DEADLINE_EXCEEDED])
def test_a_heartbeat_cut_off_keeps_the_member(status: int) -> None:
    data = {"call": "heartbeat", "method": "ConsumerGroupHeartbeat", "status": status}
    outcome = node_with_fake_server(CUTTING_OFF, CALL, data, timeoutMs=2000)
    assert outcome["outcome"] == "done", outcome


def test_a_produce_without_a_sequence_leaves_a_call_past_its_deadline_to_the_caller() -> None:
    data = {"call": "plain", "method": "Produce", "status": DEADLINE_EXCEEDED}
    outcome = node_with_fake_server(CUTTING_OFF, CALL, data, timeoutMs=2000)
    assert outcome == {"outcome": {"code": DEADLINE_EXCEEDED}, "sent": 1}


@pytest.mark.parametrize("status", [RESOURCE_EXHAUSTED, INVALID_ARGUMENT])
@pytest.mark.parametrize(("call", "method"), CALLS[:3])
def test_a_request_refused_as_sent_is_not_sent_again(call: str, method: str, status: int) -> None:
    data = {"call": call, "method": method, "status": status}
    outcome = node_with_fake_server(CUTTING_OFF, CALL, data, timeoutMs=2000)
    assert outcome == {"outcome": {"code": status}, "sent": 1}

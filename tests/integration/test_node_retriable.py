"""What the Node.js client retries of the codes errors.proto marks retriable (clients/node
errors.js, producer.js, samsa.js), against a fake server.

Goal: every retriable code is `error.retriable` (tests/unit/client/test_node_errors.py), but a
call retries on its own only what it can send again safely: an idempotent produce retries a
write whose outcome is unknown (NETWORK_EXCEPTION, REQUEST_TIMED_OUT) with its sequence, which
the leader dedupes; a produce without a sequence does not (a retry could store the records
twice) and rejects with the retriable error, for the application to decide; a Fetch answered
CORRUPT_MESSAGE (the stored batch does not decode: errors.proto) is not fetched again.

Method: a Node script runs a fake ControllerService and BrokerService (real gRPC on loopback, in
the same process) whose leader answers the first Produce and every Fetch with data.code, and a
SamsaClient calling it once. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

# One partition led by the fake; the first Produce is refused with data.code, the next written
# at offset 0; every Fetch is refused with data.code.
REFUSING_LEADER = """{
  controller: { DescribeTopics: (request) => one_partition_answer(request) },
  broker: {
    InitProducerId: () => ({ producer_id: '100', producer_epoch: 0 }),
    Produce(request) {
      if (asked_before('Produce') === 0) {
        return partition_answer(request, { error_code: data.code, base_offset: -1 });
      }
      return partition_answer(request, { base_offset: '0' });
    },
    Fetch: (request) => partition_answer(request, { error_code: data.code }),
  },
}"""
# Runs data.call once; returns its outcome and how many requests of data.method were sent.
CALL_ONCE = """
const calls = {
  idempotent: () => client.produce('t', 0, [{ value: 'v' }]),
  plain: () => client.produce('t', 0, [{ value: 'v' }], 1),
  fetch: () => client.fetch('t', 0, 0, 0),
};
const outcome = await calls[data.call]().then(
  () => 'done',
  (error) => ({ code: error.code, retriable: error.retriable }),
);
return { outcome, sent: server_calls.filter(([method]) => method === data.method).length };
"""


@pytest.mark.parametrize("code", ["ERROR_CODE_NETWORK_EXCEPTION", "ERROR_CODE_REQUEST_TIMED_OUT"])
def test_an_idempotent_produce_retries_a_write_of_unknown_outcome(code: str) -> None:
    data = {"code": code, "call": "idempotent", "method": "Produce"}
    outcome = node_with_fake_server(REFUSING_LEADER, CALL_ONCE, data, timeoutMs=2000)
    assert outcome == {"outcome": "done", "sent": 2}


@pytest.mark.parametrize("code", ["ERROR_CODE_NETWORK_EXCEPTION", "ERROR_CODE_REQUEST_TIMED_OUT"])
def test_a_produce_without_a_sequence_leaves_a_write_of_unknown_outcome_to_the_caller(
    code: str,
) -> None:
    data = {"code": code, "call": "plain", "method": "Produce"}
    outcome = node_with_fake_server(REFUSING_LEADER, CALL_ONCE, data, timeoutMs=2000)
    assert outcome == {"outcome": {"code": code, "retriable": True}, "sent": 1}


def test_a_produce_without_a_sequence_retries_what_wrote_nothing() -> None:
    data = {"code": "ERROR_CODE_REPLICA_NOT_AVAILABLE", "call": "plain", "method": "Produce"}
    outcome = node_with_fake_server(REFUSING_LEADER, CALL_ONCE, data, timeoutMs=2000)
    assert outcome == {"outcome": "done", "sent": 2}


def test_a_fetch_of_a_batch_that_does_not_decode_is_not_sent_again() -> None:
    data = {"code": "ERROR_CODE_CORRUPT_MESSAGE", "call": "fetch", "method": "Fetch"}
    outcome = node_with_fake_server(REFUSING_LEADER, CALL_ONCE, data, timeoutMs=2000)
    expected = {"code": "ERROR_CODE_CORRUPT_MESSAGE", "retriable": True}
    assert outcome == {"outcome": expected, "sent": 1}

"""The Node.js client's idempotent producer when the leader has forgotten its producer id
(clients/node/producer.js), against a fake server.

Goal: a leader answers UNKNOWN_PRODUCER_ID to a sequence above 0 from a producer id it holds no
state for (it expired after producer.id.expiration.ms without a write, or its batches were
deleted); nothing was written, so the client bumps its producer epoch and sends the call again
from sequence 0, as Kafka's producer does (KIP-360), instead of failing the write. A call an
earlier attempt of which may have been written is not sent again. After any call failed for
good, the next starts at sequence 0 under the next epoch of the same producer id, with no
InitProducerId (broker.proto InitProducerIdResponse, the Python SDK's bumped_producer_epoch);
a new producer id is asked for only when the epoch is at 32767 or the leader answered
INVALID_PRODUCER_EPOCH (a newer epoch of the id fenced this one).

Method: a Node script runs a fake ControllerService and BrokerService (real gRPC on loopback, in
the same process) whose leader forgets every producer id after its first write, and a
SamsaClient producing twice. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

# One partition led by the fake; InitProducerId hands out 100, 101, ... at data.epoch (0 by
# default); the leader accepts a producer id's sequence 0 and forgets the producer right after
# (its state expired), so any later sequence of it is refused with UNKNOWN_PRODUCER_ID. With
# data.time_out_first, the first attempt of the second write is answered REQUEST_TIMED_OUT (it
# may have been written); with data.refuse_second, the second write is answered that code.
FORGETFUL_LEADER = """{
  controller: {
    DescribeTopics: (request) => one_partition_answer(request),
  },
  broker: {
    InitProducerId() {
      const producer_epoch = data.epoch || 0;
      return { producer_id: String(100 + asked_before('InitProducerId')), producer_epoch };
    },
    Produce(request) {
      const sent = request.topics[0].partitions[0];
      const refused = (code) => partition_answer(request, { error_code: code, base_offset: -1 });
      if (data.time_out_first && asked_before('Produce') === 1) {
        return refused('ERROR_CODE_REQUEST_TIMED_OUT');
      }
      if (data.refuse_second && asked_before('Produce') === 1) return refused(data.refuse_second);
      if (sent.base_sequence !== 0) return refused('ERROR_CODE_UNKNOWN_PRODUCER_ID');
      return partition_answer(request, { base_offset: String(asked_before('Produce')) });
    },
  },
}"""
# Produces twice, one record each; returns the second call's outcome and what was sent.
PRODUCE_TWICE = """
await client.produce('quiet', 0, [{ key: 'k', value: 'first' }]);
const second = await client.produce('quiet', 0, [{ key: 'k', value: 'second' }]).then(
  (offset) => ({ offset }),
  (error) => ({ error: error.code }),
);
const sent = server_calls
  .filter(([method]) => method === 'Produce')
  .map(([, request]) => request.topics[0].partitions[0])
  .map((p) => [p.producer_id, p.producer_epoch, p.base_sequence]);
return { second, sent, inits: asked_before('InitProducerId') + 1 };
"""


def test_a_forgotten_producer_id_is_renewed_and_the_call_sent_again() -> None:
    outcome = node_with_fake_server(FORGETFUL_LEADER, PRODUCE_TWICE, {}, timeoutMs=3000)
    assert outcome == {
        "second": {"offset": 2},
        "sent": [["100", 0, 0], ["100", 0, 1], ["100", 1, 0]],
        "inits": 1,
    }


def test_a_call_that_may_have_been_written_is_not_sent_again() -> None:
    # The second call's first attempt timed out (perhaps written), its retry is refused with
    # UNKNOWN_PRODUCER_ID: sending it under a new epoch could store it twice.
    data = {"time_out_first": True}
    outcome = node_with_fake_server(FORGETFUL_LEADER, PRODUCE_TWICE, data, timeoutMs=3000)
    assert outcome == {
        "second": {"error": "ERROR_CODE_UNKNOWN_PRODUCER_ID"},
        "sent": [["100", 0, 0], ["100", 0, 1], ["100", 0, 1]],
        "inits": 1,
    }


# Three produces, one record each, the second failing for good; what was sent and asked.
PRODUCE_THRICE = """
const outcomes = [];
for (const value of ['first', 'second', 'third']) {
  outcomes.push(await client.produce('quiet', 0, [{ value }]).catch((error) => error.code));
}
const sent = server_calls
  .filter(([method]) => method === 'Produce')
  .map(([, request]) => request.topics[0].partitions[0])
  .map((p) => [p.producer_id, p.producer_epoch, p.base_sequence]);
return { outcomes, sent, inits: asked_before('InitProducerId') + 1 };
"""


def test_a_call_failed_for_good_bumps_the_epoch_of_the_same_producer_id() -> None:
    # OUT_OF_ORDER_SEQUENCE_NUMBER is final; the third call starts again at sequence 0 under
    # epoch 1 of producer id 100, which the leader (no state: it forgot 100) takes.
    data = {"refuse_second": "ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER"}
    outcome = node_with_fake_server(FORGETFUL_LEADER, PRODUCE_THRICE, data, timeoutMs=3000)
    assert outcome == {
        "outcomes": [0, "ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER", 2],
        "sent": [["100", 0, 0], ["100", 0, 1], ["100", 1, 0]],
        "inits": 1,
    }


@pytest.mark.parametrize(
    ("epoch", "code"),
    [(0, "ERROR_CODE_INVALID_PRODUCER_EPOCH"), (32767, "ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER")],
)
def test_a_fenced_or_exhausted_epoch_takes_a_new_producer_id(epoch: int, code: str) -> None:
    data = {"refuse_second": code, "epoch": epoch}
    outcome = node_with_fake_server(FORGETFUL_LEADER, PRODUCE_THRICE, data, timeoutMs=3000)
    assert outcome == {
        "outcomes": [0, code, 2],
        "sent": [["100", epoch, 0], ["100", epoch, 1], ["101", epoch, 0]],
        "inits": 2,
    }

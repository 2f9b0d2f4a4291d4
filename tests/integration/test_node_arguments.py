"""The Node.js client's public calls refuse a wrong argument at once (clients/node/checks.js),
against a fake server.

Goal: the proto's encoder sends what it is given as best it can, so a wrong argument went out as
another, valid one: produce(..., 'all') (Kafka's spelling of acks -1) was sent with acks 0, fire
and forget; fetch() of a NaN or missing offset read from offset 0; a negative or fractional
partition was looked up, not found, and retried as UNKNOWN_TOPIC_OR_PARTITION until the call's
timeout (two minutes for a produce). Now 'all' is -1, and a partition, offset, acks (not an
integer: the leader answers INVALID_REQUIRED_ACKS to an integer it does not take) or client
timeout the call cannot take is a RangeError before anything is sent, as Kafka refuses them
(ProducerRecord's partition, seek's offset, the acks config). A record's timestamp 0 (the epoch)
was replaced by the time of sending, and a negative, fractional or non-numeric one was sent as
-5, 1 or 0; now 0 is sent as 0, and a timestamp that is not an integer >= 0 (ms) is a
RangeError before anything is sent, as Kafka's ProducerRecord and the Python SDK refuse it.

Method: a Node script runs a fake ControllerService and BrokerService (real gRPC on loopback, in
the same process), calls the client with each argument and reports the outcome and what the
fake was sent. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

LEADER = """{
  controller: { DescribeTopics: (request) => one_partition_answer(request) },
  broker: {
    InitProducerId: () => ({ producer_id: '100', producer_epoch: 0 }),
    Produce: (request) => partition_answer(request, { base_offset: '0' }),
    Fetch: (request) => partition_answer(request, { high_watermark: 0, next_fetch_offset: 0 }),
    ListOffsets: (request) => partition_answer(request, { offset: '0' }),
    DeleteRecords: (request) => partition_answer(request, { low_watermark: '0' }),
  },
}"""
# Runs each of data (a list of JavaScript expressions over `client`) in turn; returns, for each,
# its outcome ('ok' or the error's name) and the broker requests it sent.
EACH_CALL = """
const outcomes = [];
for (const expression of data) {
  const before = server_calls.length;
  const outcome = await eval(expression).then(() => 'ok', (error) => error.name);
  const sent = server_calls.slice(before).map(([method]) => method)
    .filter((method) => method !== 'DescribeTopics' && method !== 'InitProducerId');
  outcomes.push([outcome, sent]);
}
return outcomes;
"""


def run_each(expressions: list[str]) -> list[list[object]]:
    outcome = node_with_fake_server(LEADER, EACH_CALL, expressions, timeoutMs=500)
    assert isinstance(outcome, list)
    return outcome


def test_acks_all_is_minus_1_and_other_acks_are_refused() -> None:
    body = """
    await client.produce('t', 0, [{ value: 'v' }], 'all');
    const refused = await Promise.all(['one', 1.5, NaN, undefined].map((acks) =>
      client.produce('t', 0, [{ value: 'v' }], acks).then(() => 'ok', (error) => error.name)));
    const acks = server_calls.filter(([m]) => m === 'Produce').map(([, request]) => request.acks);
    return { acks, refused };
    """
    outcome = node_with_fake_server(LEADER, body, {}, timeoutMs=500)
    # undefined is the default, -1.
    assert outcome == {"acks": [-1, -1], "refused": ["RangeError"] * 3 + ["ok"]}


@pytest.mark.parametrize("partition", ["-1", "1.5", "'0'", "NaN"])
def test_a_partition_that_is_not_one_is_refused_unsent(partition: str) -> None:
    calls = [
        f"client.produce('t', {partition}, [{{ value: 'v' }}])",
        f"client.produce('t', {partition}, [{{ value: 'v' }}], 1)",
        f"client.fetch('t', {partition}, 0, 0)",
        f"client.listOffset('t', {partition}, 'latest')",
        f"client.deleteRecords('t', {partition}, 0)",
    ]
    assert run_each(calls) == [["RangeError", []]] * len(calls)


@pytest.mark.parametrize("offset", ["NaN", "undefined", "-1", "1.5", "'5'", "2 ** 53"])
def test_a_fetch_offset_that_is_not_one_is_refused_unsent(offset: str) -> None:
    assert run_each([f"client.fetch('t', 0, {offset}, 0)"]) == [["RangeError", []]]


@pytest.mark.parametrize("timestamp", ["-5", "1.5", "'x'", "NaN", "2 ** 53"])
def test_a_record_timestamp_that_is_not_a_time_is_refused_unsent(timestamp: str) -> None:
    calls = [
        f"client.produce('t', 0, [{{ value: 'v', timestamp: {timestamp} }}])",
        f"client.produce('t', 0, [{{ value: 'v', timestamp: {timestamp} }}], 1)",
        f"client.produceByKey('t', [{{ key: 'k', value: 'v', timestamp: {timestamp} }}])",
    ]
    assert run_each(calls) == [["RangeError", []]] * len(calls)


def test_a_record_timestamp_of_0_is_sent_as_0() -> None:
    body = """
    await client.produce('t', 0, [{ value: 'a', timestamp: 0 }, { value: 'b', timestamp: null }]);
    const [, request] = server_calls.find(([method]) => method === 'Produce');
    return request.topics[0].partitions[0].typed_records.map((r) => r.timestamp_ms !== '0');
    """
    assert node_with_fake_server(LEADER, body, {}, timeoutMs=500) == [False, True]


def test_delete_records_takes_minus_1_and_valid_calls_are_sent() -> None:
    calls = [
        "client.deleteRecords('t', 0, -1)",
        "client.deleteRecords('t', 0, -2)",
        "client.fetch('t', 0, 0, 0)",
        "client.produce('t', 0, [{ value: 'v' }], 0)",
    ]
    assert run_each(calls) == [
        ["ok", ["DeleteRecords"]],
        ["RangeError", []],
        ["ok", ["Fetch"]],
        ["ok", ["Produce"]],
    ]


def test_client_timeouts_must_be_numbers_of_milliseconds() -> None:
    body = """
    const { SamsaClient } = require('./samsa');
    const make = (options) => {
      try {
        new SamsaClient(endpoint, options).close();
        return 'ok';
      } catch (error) {
        return error.name;
      }
    };
    return [{ timeoutMs: '300' }, { timeoutMs: NaN }, { timeoutMs: 0 },
      { deliveryTimeoutMs: 'x' }, { timeoutMs: 300, deliveryTimeoutMs: 600 }].map(make);
    """
    outcome = node_with_fake_server(LEADER, body, {})
    assert outcome == ["RangeError", "RangeError", "RangeError", "RangeError", "ok"]

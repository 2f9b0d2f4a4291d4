"""How the Node.js client turns an application's keys, values and header values into record
bytes (clients/node/records.js), against a fake server.

Goal: bytes given as any Uint8Array (not only a Buffer) or an ArrayBuffer are stored as they are,
and a key partitions the same whichever form it takes; strings are stored as UTF-8. A produce
call sends its records as they were when it was made (and stamps them then), even when it is
sent later, behind an earlier call to the partition: the caller may reuse its arrays and buffers.

Method: a Node script runs a fake ControllerService and BrokerService (real gRPC on loopback, in
the same process) and a SamsaClient producing to it; the test reads the typed records the fake
received. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import node_with_fake_server, skip_module_without_node

skip_module_without_node()

pytestmark = pytest.mark.timeout(60)

# One partition led by the fake, which stores nothing and answers every produce at offset 0.
ONE_PARTITION = """{
  controller: {
    DescribeTopics: (request) => one_partition_answer(request),
  },
  broker: {
    Produce: (request) => partition_answer(request, { base_offset: 0 }),
  },
}"""


def test_bytes_in_any_form_are_stored_as_they_are() -> None:
    body = """
    const { partitionForKey } = require('./samsa');
    const bytes = new Uint8Array([0, 1, 2, 255, 254]).subarray(1); // a view into a larger buffer
    await client.produce('bytes', 0, [
      { key: bytes, value: bytes.slice().buffer, headers: [['h', new Uint8Array([7, 8])]] },
      { key: 'é', value: Buffer.from([9]) },
    ], 1);
    const [, request] = server_calls.find(([method]) => method === 'Produce');
    const hex = (b) => (b === undefined || b === null ? null : Buffer.from(b).toString('hex'));
    const records = request.topics[0].partitions[0].typed_records.map((r) => [
      hex(r.key), hex(r.value), r.headers.map((h) => [h.key, hex(h.value)]),
    ]);
    const same = partitionForKey(bytes, 7) === partitionForKey(Buffer.from([1, 2, 255, 254]), 7);
    return { records, same };
    """
    outcome = node_with_fake_server(ONE_PARTITION, body, {}, timeoutMs=2000)
    assert outcome == {
        "records": [["0102fffe", "0102fffe", [["h", "0708"]]], ["c3a9", "09", []]],
        "same": True,
    }


# Like ONE_PARTITION, with producer ids, and each produce answered 300 ms after it came.
SLOW_PARTITION = """{
  controller: {
    DescribeTopics: (request) => one_partition_answer(request),
  },
  broker: {
    InitProducerId: () => ({ producer_id: '100', producer_epoch: 0 }),
    async Produce(request) {
      await sleep(300);
      return partition_answer(request, { base_offset: String(asked_before('Produce')) });
    },
  },
}"""


@pytest.mark.parametrize("idempotence", [True, False])
def test_a_call_sends_its_records_as_they_were_when_it_was_made(idempotence: bool) -> None:
    # The idempotent second call waits for the first; the caller meanwhile reuses its array and
    # buffer. Both calls sent what they held then (they sent the later content), stamped then.
    body = """
    const batch = [{ key: 'k', value: 'first', headers: [['h', Buffer.from('a')]] }];
    const record = { key: 'k', value: Buffer.from('one') };
    const madeAt = Date.now();
    const calls = [client.produce('t', 0, batch), client.produce('t', 0, [record])];
    batch.length = 0;
    batch.push({ key: 'k', value: 'later' });
    record.value.write('two');
    await Promise.all(calls);
    return server_calls.filter(([method]) => method === 'Produce').map(([, request]) => {
      const typed = request.topics[0].partitions[0].typed_records;
      const late = typed.some((r) => Number(r.timestamp_ms) > madeAt + 200);
      return [typed.map((r) => r.value.toString()), typed.map((r) => r.headers.length), late];
    });
    """
    outcome = node_with_fake_server(SLOW_PARTITION, body, {}, idempotence=idempotence)
    assert outcome == [[["first"], [1], False], [["one"], [0], False]]

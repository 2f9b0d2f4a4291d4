"""How the Node.js client turns an application's keys, values and header values into record
bytes (clients/node/records.js), against a fake server.

Goal: bytes given as any Uint8Array (not only a Buffer) or an ArrayBuffer are stored as they are,
and a key partitions the same whichever form it takes; strings are stored as UTF-8.

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

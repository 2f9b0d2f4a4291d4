"""Goal: the Node client names itself to the servers on every call, as the samsa-client-id
metadata client quotas count it under: the clientId option when given, else Kafka-style
"samsa-node-N" (N counting the process's SamsaClients from 1, so two are told apart). A
clientId that is no string, or longer than common/limits.py client_id_length_max, is refused
with a RangeError before anything is sent.

Method: run clients/node/samsa.js under `node` with SamsaClient.stub replaced by a fake service
whose methods record the gRPC metadata each call carries. No server, no gRPC channel.
"""

from __future__ import annotations

import re

from node_script import needs_node, run_node_script

from samsa.common import limits
from samsa.metadata.client_quotas import CLIENT_ID_METADATA_KEY

pytestmark = needs_node

SCRIPT = """
const { SamsaClient } = require(process.argv[1]);
const sent = [];
function recording(client) {
  const answer = { topics: [] };
  const service = new Proxy({}, {
    get: (_, method) => (request, metadata, options, done) => {
      sent.push({ method, ids: metadata.get('%(key)s') });
      done(null, answer);
    },
  });
  client.stub = () => service;
  return client;
}
const refused = (options) => {
  try { new SamsaClient('a:1', options); return null; } catch (error) { return error.name; }
};
(async () => {
  const named = recording(new SamsaClient('a:1', { clientId: 'etl', idempotence: false }));
  const first = recording(new SamsaClient('a:1', { idempotence: false }));
  const second = recording(new SamsaClient('a:1', { clientId: '', idempotence: false }));
  await named.call('broker', 'b:1', 'Produce', {});
  await named.call('broker', 'b:1', 'Fetch', {});
  await first.call('broker', 'b:1', 'ListOffsets', {});
  await second.call('controller', 'c:1', 'DescribeTopics', {});
  console.log(JSON.stringify({
    sent, ids: [named.clientId, first.clientId, second.clientId],
    longest: refused({ clientId: 'x'.repeat(%(longest)d) }),
    tooLong: refused({ clientId: 'x'.repeat(%(longest)d + 1) }),
    number: refused({ clientId: 7 }),
  }));
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_every_call_names_the_client_and_each_default_is_its_own() -> None:
    script = SCRIPT % {"key": CLIENT_ID_METADATA_KEY, "longest": limits.client_id_length_max}
    out = run_node_script(script, "samsa.js")
    named, first, second = out["ids"]
    assert named == "etl"
    assert re.fullmatch(r"samsa-node-\d+", first) and re.fullmatch(r"samsa-node-\d+", second)
    assert first != second
    assert out["sent"] == [
        {"method": "Produce", "ids": ["etl"]},
        {"method": "Fetch", "ids": ["etl"]},
        {"method": "ListOffsets", "ids": [first]},
        {"method": "DescribeTopics", "ids": [second]},
    ]
    assert out["longest"] is None
    assert out["tooLong"] == "RangeError" and out["number"] == "RangeError"

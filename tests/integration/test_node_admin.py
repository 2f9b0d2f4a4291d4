"""The Node.js client's admin writes (clients/node/samsa.js, controllerWrite) against a real
cluster.

Goal: a NOT_CONTROLLER answer that names an active controller which then cannot be reached (it
failed over again) does not pin the client to that endpoint: the next attempt asks the
bootstrap servers again, as the Python SDK does, and the write succeeds within its timeout.

Method: a short Node script over samsa.js against a local cluster of 1 controller, 2 brokers and
1 coordinator (real processes, real gRPC). The first CreateTopics is answered at the client's
call seam with NOT_CONTROLLER naming a port nothing listens on; the Python Admin then lists the
topic. Skipped when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import pytest
from node_helpers import bootstrap_fixture, node_script, skip_module_without_node

from samsa.client import Admin

skip_module_without_node()

pytestmark = pytest.mark.timeout(120)
bootstrap = bootstrap_fixture("node-admin")

# Answers the first CreateTopics with NOT_CONTROLLER naming 127.0.0.1:1 (refused at once).
REDIRECT_TO_A_DEAD_CONTROLLER = """
const call = client.call.bind(client);
let redirected = false;
client.call = async (kind, endpoint, method, request, ...rest) => {
  if (method === 'CreateTopics' && !redirected) {
    redirected = true;
    const active_controller = { node_id: 9, endpoint: '127.0.0.1:1' };
    return { status: { error_code: 'ERROR_CODE_NOT_CONTROLLER', active_controller }, topics: [] };
  }
  return call(kind, endpoint, method, request, ...rest);
};
"""


def test_a_write_redirected_to_an_unreachable_controller_asks_the_bootstrap_again(
    bootstrap: str,
) -> None:
    topic = "after-a-dead-redirect"
    created = node_script(
        bootstrap,
        topic,
        REDIRECT_TO_A_DEAD_CONTROLLER + "return client.createTopic(topic, 2, 1);",
        timeoutMs=3000,
    )
    assert created is True
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert topic in admin.list_topics()

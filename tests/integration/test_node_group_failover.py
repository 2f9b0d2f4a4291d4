"""The Node.js client's group member when its coordinator does not answer for a while
(clients/node/group.js).

Goal: a heartbeat that fails on what passes (the coordinator paused past the call's deadline)
is sent again and the member goes on owning its partitions, as Kafka's consumer does; it must
not stop heartbeating for good while still holding them (its session would expire and its
partitions go to another member while it reads on).

Method: a local cluster of 1 controller, 2 brokers and 1 coordinator (real processes, real
gRPC); a Node script over samsa.js joins a group with a 1 s request timeout and reports on
stdout; the test pauses the coordinator (SIGSTOP) until the script saw a heartbeat fail, then
resumes it (SIGCONT) and the script waits for a heartbeat to succeed. Skipped when `node` or
clients/node/node_modules is missing.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest
from cluster_helpers import local_cluster
from node_helpers import SETTINGS, skip_module_without_node, start_node_script

from samsa.cli.launcher import LocalCluster
from samsa.client import Admin, NewTopic

skip_module_without_node()

pytestmark = pytest.mark.timeout(120)

# Joins group `data`, prints its partition count, then (after a stdin line: the coordinator is
# paused) waits for a heartbeat to fail and prints that; after another stdin line (resumed) it
# waits for a heartbeat to succeed, or the member to stop, and returns what it found.
HEARTBEAT_THROUGH_A_PAUSE = """
const readline = require('node:readline');
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(probe, ms) {
  const deadline = Date.now() + ms;
  while (!probe() && Date.now() < deadline) await sleep(20);
}
const member = await client.joinGroup(data, [topic]);
await member.waitForAssignment(10000);
let beats = 0;
const heartbeat = member.heartbeat.bind(member);
member.heartbeat = async () => {
  await heartbeat();
  beats += 1;
};
console.log(JSON.stringify({ owned: member.assignment.length }));
await lines.next();
await until(() => member.lastError || member.error, 15000);
console.log(JSON.stringify({ failed: String((member.lastError || member.error || {}).message) }));
await lines.next();
const before = beats;
await until(() => beats > before || member.error, 20000);
const error = member.error ? member.error.message : null;
return { error, owned: member.assignment.length, beats: beats - before };
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(
        tmp_path_factory.mktemp("node-group-failover"), 1, 2, SETTINGS, coordinators=1
    ) as running:
        yield running


def test_a_member_heartbeats_on_after_its_coordinator_paused(cluster: LocalCluster) -> None:
    bootstrap = ",".join(broker.endpoint for broker in cluster.spec.brokers)
    topic, group = "paused-coordinator", "paused-coordinator-group"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    script = start_node_script(bootstrap, topic, HEARTBEAT_THROUGH_A_PAUSE, group, timeoutMs=1000)
    assert script.stdin is not None and script.stdout is not None
    paused = False
    try:
        assert json.loads(script.stdout.readline()) == {"owned": 2}
        cluster.kill("coordinator-1", signal.SIGSTOP)
        paused = True
        script.stdin.write("paused\n")
        script.stdin.flush()
        assert "failed" in json.loads(script.stdout.readline())
        cluster.kill("coordinator-1", signal.SIGCONT)
        paused = False
        script.stdin.write("resumed\n")
        script.stdin.close()  # the end of stdin: nothing more keeps Node running
        outcome = json.loads(script.stdout.readline())
        script.wait(timeout=30)
    finally:
        if paused:
            cluster.kill("coordinator-1", signal.SIGCONT)
        if script.poll() is None:
            script.kill()
            script.wait()
    assert outcome["error"] is None, script.stderr.read() if script.stderr else ""
    assert outcome["owned"] == 2
    assert outcome["beats"] >= 1
    assert script.returncode == 0

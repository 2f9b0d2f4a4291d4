"""What the Node client's integration tests share: where `node` and clients/node are, the
cluster they run against (1 controller, 2 brokers, 1 coordinator) as a module's `bootstrap`
fixture, example.js as a command, and `node_script`, a short script over samsa.js.
`NODE_MISSING` is the reason to skip when `node` or clients/node/node_modules is not there;
`skip_module_without_node` skips the calling test module then."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster

NODE_DIR = Path(__file__).resolve().parents[2] / "clients" / "node"
NODE = shutil.which("node") or ""
NODE_MISSING = (
    "needs `node` on PATH and clients/node/node_modules (npm ci --prefix clients/node)"
    if not NODE or not (NODE_DIR / "node_modules").is_dir()
    else ""
)
SETTINGS = FAST_SETTINGS | {
    "offsets.topic.num.partitions": "2",
    "group.consumer.heartbeat.interval.ms": "300",
}
Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def skip_module_without_node() -> None:
    """Skips the test module being imported (its tests are not collected) when NODE_MISSING."""
    if NODE_MISSING:
        pytest.skip(NODE_MISSING, allow_module_level=True)


@contextmanager
def node_cluster(data_dir: Path) -> Iterator[str]:
    """A running cluster; yields the brokers' endpoints, all the Node client needs."""
    with local_cluster(data_dir, 1, 2, SETTINGS, coordinators=1) as running:
        yield ",".join(broker.endpoint for broker in running.spec.brokers)


def bootstrap_fixture(data_dir_name: str) -> Callable[..., Iterator[str]]:
    """A module-scoped fixture over `node_cluster` in a fresh directory named `data_dir_name`;
    a test module binds it as `bootstrap = bootstrap_fixture(...)`, one cluster for its tests."""

    @pytest.fixture(scope="module")
    def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        with node_cluster(tmp_path_factory.mktemp(data_dir_name)) as endpoints:
            yield endpoints

    return bootstrap


def node(bootstrap: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`node clients/node/example.js --bootstrap BOOTSTRAP ARGS...`, finished."""
    return subprocess.run(
        [NODE, str(NODE_DIR / "example.js"), "--bootstrap", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


# A Node script's frame: `client` (a SamsaClient with `options`), `topic`, `data` (JSON from
# Python) and `NO_ERROR` are in scope of BODY, an async function body whose return value is
# printed as JSON.
SCRIPT = """
const { SamsaClient, NO_ERROR } = require(process.env.NODE_TEST_CLIENT);
const options = JSON.parse(process.env.NODE_TEST_OPTIONS);
const client = new SamsaClient(process.env.SAMSA_BOOTSTRAP, options);
const topic = process.env.NODE_TEST_TOPIC;
const data = JSON.parse(process.env.NODE_TEST_DATA);
(async () => {
BODY
})()
  .then((result) => console.log(JSON.stringify(result)))
  .catch((error) => { console.error(error.stack); process.exitCode = 1; })
  .finally(() => client.close());
"""


def node_script(
    bootstrap: str,
    topic: str,
    body: str,
    data: object = None,
    timeout_s: float = 60,
    **options: object,
) -> object:
    """Runs BODY in SCRIPT against the cluster and returns what it printed, parsed. A script
    still running after `timeout_s` (a handle left open keeps Node alive) is killed and fails."""
    done = subprocess.run(
        [NODE, "-e", SCRIPT.replace("BODY", body)],
        env=script_env(bootstrap, topic, data, options),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def script_env(
    bootstrap: str, topic: str, data: object, options: dict[str, object]
) -> dict[str, str]:
    """The environment SCRIPT reads its frame from."""
    return {
        "PATH": str(Path(NODE).parent),
        "NODE_TEST_CLIENT": str(NODE_DIR / "samsa.js"),
        "SAMSA_BOOTSTRAP": bootstrap,
        "NODE_TEST_OPTIONS": json.dumps(options),
        "NODE_TEST_TOPIC": topic,
        "NODE_TEST_DATA": json.dumps(data),
    }


def start_node_script(
    bootstrap: str, topic: str, body: str, data: object = None, **options: object
) -> subprocess.Popen[str]:
    """BODY in SCRIPT, started with pipes (text lines) for a test to talk to while it runs; the
    caller reads its lines, writes to its stdin and waits for it (or kills it)."""
    return subprocess.Popen(
        [NODE, "-e", SCRIPT.replace("BODY", body)],
        env=script_env(bootstrap, topic, data, options),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# A Node script's frame against a fake Samsa server in the same process: HANDLERS is an object
# literal mapping a service name (as samsa.js loads it: broker, controller, lookup, group) to
# its method handlers; `server_calls` collects every request the fake answered, as
# [method, request] (`asked_before(method)` counts them), and `endpoint` is its host:port (for
# answers naming a broker). `client` (a SamsaClient bootstrapping from the fake, with
# `options`) and `data` are in scope of BODY, whose return value is printed as JSON.
# `topic_answer(request, partitions, brokers)` is a DescribeTopics answer naming the topic asked
# about with `partitions`, every broker of `brokers` (default [1]) at the fake's endpoint;
# `one_partition_answer(request, leader_epoch)` one whose partition 0 is led by the fake alone.
# `partition_answer(request, fields)` answers a Produce, Fetch or ListOffsets of the topic it
# names with partition 0 and `fields`. `the_fake_coordinates` is a CoordinatorLookupService
# naming the fake coordinator of every key. `sleep(ms)` resolves after ms milliseconds.
FAKE_SERVER_SCRIPT = """
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { SamsaClient } = require('./samsa');
const root = path.resolve('..', '..', 'proto');
const files = ['broker.proto', 'controller.proto', 'coordinator.proto'];
const definition = protoLoader.loadSync(
  files.map((name) => path.join(root, 'samsa', 'v1', name)),
  { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
    includeDirs: [root] },
);
const v1 = grpc.loadPackageDefinition(definition).samsa.v1;
const SERVICES = {
  broker: v1.BrokerService, controller: v1.ControllerService,
  lookup: v1.CoordinatorLookupService, group: v1.GroupCoordinatorService,
};
const data = JSON.parse(process.env.NODE_TEST_DATA);
const options = JSON.parse(process.env.NODE_TEST_OPTIONS);
const server_calls = [];
// How many `method` requests came before the one being answered.
const asked_before = (method) => server_calls.filter(([name]) => name === method).length - 1;
let endpoint = null; // the fake's host:port, once it listens
const topic_answer = (request, partitions, brokers = [1]) => ({
  topics: [{ name: request.names[0], topic_id: Buffer.alloc(16, 7), partitions }],
  broker_endpoints: Object.fromEntries(brokers.map((id) => [id, endpoint])),
});
const one_partition_answer = (request, leader_epoch = 1) => topic_answer(
  request, [{ partition: 0, leader: 1, leader_epoch, replicas: [1], isr: [1] }],
);
const partition_answer = (request, fields) => ({
  topics: [{ name: request.topics[0].name, partitions: [{ partition: 0, ...fields }] }],
});
const the_fake_coordinates = {
  FindCoordinator: (request) => ({
    coordinators: [{ key: request.keys[0], coordinator_id: 1, endpoint }],
  }),
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const handlers = (HANDLERS);
const server = new grpc.Server();
for (const [kind, methods] of Object.entries(handlers)) {
  const wrapped = {};
  for (const [method, handler] of Object.entries(methods)) {
    wrapped[method] = (call, callback) => {
      server_calls.push([method, call.request]);
      Promise.resolve(handler(call.request)).then((answer) => callback(null, answer), callback);
    };
  }
  server.addService(SERVICES[kind].service, wrapped);
}
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error;
  endpoint = `127.0.0.1:${port}`;
  const client = new SamsaClient(endpoint, options);
  (async () => {
BODY
  })()
    .then((result) => console.log(JSON.stringify(result)))
    .catch((error) => { console.error(error.stack); process.exitCode = 1; })
    .finally(() => client.close().then(() => server.forceShutdown()));
});
"""


def node_with_fake_server(
    handlers: str, body: str, data: object = None, timeout_s: float = 30, **options: object
) -> object:
    """Runs BODY in FAKE_SERVER_SCRIPT (a SamsaClient against a fake server answering with
    HANDLERS, no cluster) and returns what it printed, parsed."""
    script = FAKE_SERVER_SCRIPT.replace("HANDLERS", handlers).replace("BODY", body)
    done = subprocess.run(
        [NODE, "-e", script],
        cwd=NODE_DIR,
        env={
            "PATH": str(Path(NODE).parent),
            "NODE_TEST_DATA": json.dumps(data),
            "NODE_TEST_OPTIONS": json.dumps(options),
        },
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)

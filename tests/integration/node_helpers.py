"""What the Node client's integration tests share: where `node` and clients/node are, the
cluster they run against (1 controller, 2 brokers, 1 coordinator), and example.js as a command.
`NODE_MISSING` is the reason to skip when `node` or clients/node/node_modules is not there."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


@contextmanager
def node_cluster(data_dir: Path) -> Iterator[str]:
    """A running cluster; yields the brokers' endpoints, all the Node client needs."""
    with local_cluster(data_dir, 1, 2, SETTINGS, coordinators=1) as running:
        yield ",".join(broker.endpoint for broker in running.spec.brokers)


def node(bootstrap: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`node clients/node/example.js --bootstrap BOOTSTRAP ARGS...`, finished."""
    return subprocess.run(
        [NODE, str(NODE_DIR / "example.js"), "--bootstrap", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )

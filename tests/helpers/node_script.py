"""Running a piece of the Node.js client (clients/node) under `node` with a scripted fake in
place of the network: the setup the Node unit tests share (no server, no gRPC channel)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parents[2] / "clients" / "node"
NODE = shutil.which("node")

# A module's `pytestmark`: these tests need `node` and the client's packages.
needs_node = pytest.mark.skipif(
    NODE is None or not (NODE_DIR / "node_modules").is_dir(),
    reason="needs `node` and clients/node/node_modules (npm ci --prefix clients/node)",
)


def run_node_script(script: str, module: str) -> Any:
    """Run `script` with clients/node/`module` as its process.argv[1]; what it printed, as JSON.
    The script prints one JSON value, or exits 1 with the error on stderr (reported here)."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, "-e", script, str(NODE_DIR / module)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)

"""Goal: a stranger on a controller's Raft port costs it neither memory nor its Raft leadership,
and the broker it serves is never fenced (issue 9, hole 3).

Method: three controllers and one broker as real processes. Against the active controller's Raft
port, hold 200 idle connections, and from sixteen connections at once declare a 2 GiB frame and
keep sending (reconnecting whenever the controller closes us) for a few seconds: the unguarded
pysyncobj buffered all of it. Meanwhile sample the controller's VmRSS (/proc) and, from the
followers, who is active and whether the broker is fenced. Then check the bounds held: memory
barely grew, every stranger's connection was closed, leadership did not move, the broker was
never fenced, the WARN lines name the bound and are rate-limited, and a metadata write commits.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from cluster_helpers import (
    active_controller,
    admin_write,
    describe_cluster,
    local_cluster,
    wait_until,
)

from samsa.cli.launcher import LocalCluster
from samsa.common import limits
from samsa.v1 import controller_pb2

pytestmark = pytest.mark.timeout(180)

MIB = 1024 * 1024
FLOOD_S = 5.0
FLOOD_CONNECTIONS = 16
FLOOD_BYTES_MAX = 1024 * MIB  # the stranger's budget across all its connections
IDLE_CONNECTIONS = 200
RSS_GROWTH_BYTES_MAX = 20 * MIB  # guarded: ~1 MiB; unguarded: +50 MiB and more


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with local_cluster(tmp_path_factory.mktemp("raft-bounds"), controllers=3, brokers=1) as running:
        yield running


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def broker_view(cluster: LocalCluster, node_id: int) -> controller_pb2.DescribeClusterResponse:
    return describe_cluster(cluster.spec, node_id)


class Flood:
    """Connections that declare a 2 GiB frame and send until closed, then reconnect."""

    def __init__(self, address: tuple[str, int], deadline: float) -> None:
        self.address = address
        self.deadline = deadline
        self.sent = 0
        self.connections = 0
        self.closed_by_peer = 0
        self._lock = threading.Lock()

    def run(self) -> None:
        chunk = b"\x5a" * MIB
        while time.monotonic() < self.deadline and self.sent < FLOOD_BYTES_MAX:
            with self._lock:
                self.connections += 1
            try:
                with socket.create_connection(self.address, timeout=self._timeout()) as sock:
                    sock.sendall(struct.pack("i", 2**31 - 1))
                    while time.monotonic() < self.deadline and self.sent < FLOOD_BYTES_MAX:
                        sock.settimeout(self._timeout())
                        sock.sendall(chunk)
                        with self._lock:
                            self.sent += len(chunk)
            except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
                with self._lock:
                    self.closed_by_peer += 1
                time.sleep(0.05)
            except TimeoutError:
                pass  # the controller stopped reading: that is back-pressure, not a close

    def _timeout(self) -> float:
        return max(0.1, min(2.0, self.deadline - time.monotonic()))


class Watch:
    """Samples the active controller's RSS and the followers' view of the cluster."""

    def __init__(self, cluster: LocalCluster, active: int, pid: int) -> None:
        self.cluster, self.active, self.pid = cluster, active, pid
        self.rss_max = 0
        self.active_seen: set[int | None] = set()
        self.fenced_seen = False
        self.stop = threading.Event()

    def sample_rss(self) -> None:
        while not self.stop.is_set():
            self.rss_max = max(self.rss_max, rss_bytes(self.pid))
            self.stop.wait(0.05)

    def sample_views(self) -> None:
        followers = [c.node_id for c in self.cluster.spec.controllers if c.node_id != self.active]
        while not self.stop.is_set():
            for node_id in followers:
                with contextlib.suppress(Exception):
                    view = broker_view(self.cluster, node_id)
                    self.active_seen.add(
                        next((c.node_id for c in view.controllers if c.is_active), None)
                    )
                    self.fenced_seen |= any(b.is_fenced for b in view.brokers)
            self.stop.wait(0.1)


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ConnectionAbortedError):
        return True
    except TimeoutError:
        return False


def test_a_stranger_flooding_the_raft_port_costs_no_memory_leadership_or_fencing(cluster) -> None:
    # A healthy cluster has an active controller, but a follower may learn who it is a moment
    # later (it heard the leader's first append after the broker was unfenced): wait for all three.
    active = wait_until(
        "the controllers to agree on the active one", lambda: active_controller(cluster.spec)
    )

    def unfenced_everywhere() -> bool:
        views = [broker_view(cluster, c.node_id) for c in cluster.spec.controllers]
        return all(v.brokers and not any(b.is_fenced for b in v.brokers) for v in views)

    wait_until("every controller to see the broker unfenced", unfenced_everywhere)
    before = broker_view(cluster, active)
    broker_epoch = before.brokers[0].broker_epoch
    spec = next(c for c in cluster.spec.controllers if c.node_id == active)
    host, port = spec.raft_address.rsplit(":", 1)
    pid = cluster.processes[f"controller-{active}"].pid
    rss_before = rss_bytes(pid)

    watch = Watch(cluster, active, pid)
    watchers = [
        threading.Thread(target=watch.sample_rss, daemon=True),
        threading.Thread(target=watch.sample_views, daemon=True),
    ]
    for watcher in watchers:
        watcher.start()
    started = time.monotonic()
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(IDLE_CONNECTIONS)]
    idle_s = time.monotonic() - started
    flood = Flood((host, int(port)), time.monotonic() + FLOOD_S)
    flooders = [threading.Thread(target=flood.run, daemon=True) for _ in range(FLOOD_CONNECTIONS)]
    try:
        for thread in flooders:
            thread.start()
        for thread in flooders:
            thread.join(FLOOD_S + 10)
        flooded_s = time.monotonic() - started
        time.sleep(limits.raft_handshake_ms_max / 1000 + 0.5)  # idle ones are past their deadline
        still_open = sum(not closed_by_peer(sock) for sock in idle)
    finally:
        for sock in idle:
            sock.close()
        watch.stop.set()
        for watcher in watchers:
            watcher.join(10)
    rss_after = rss_bytes(pid)
    growth = max(watch.rss_max, rss_after) - rss_before
    print(
        f"controller-{active} VmRSS before {rss_before / MIB:.0f} MiB, peak "
        f"{watch.rss_max / MIB:.0f} MiB, after {rss_after / MIB:.0f} MiB; the stranger sent "
        f"{flood.sent / MIB:.0f} MiB over {flood.connections} connections, "
        f"{flood.closed_by_peer} closed by the controller, in {flooded_s - idle_s:.1f} s "
        f"(after opening {IDLE_CONNECTIONS} idle connections in {idle_s:.1f} s); "
        f"idle still open: {still_open}; followers saw active {watch.active_seen}, broker "
        f"fenced: {watch.fenced_seen}"
    )

    assert growth < RSS_GROWTH_BYTES_MAX, f"the controller grew by {growth / MIB:.0f} MiB"
    assert flood.closed_by_peer >= 1, "the controller never closed a 2 GiB frame's connection"
    assert still_open == 0, f"{still_open} idle strangers still hold a Raft connection"
    assert watch.active_seen == {active}, f"leadership moved: followers saw {watch.active_seen}"
    assert not watch.fenced_seen, "the broker was fenced while the Raft port was flooded"
    after = broker_view(cluster, active)
    assert [b.broker_epoch for b in after.brokers] == [broker_epoch]
    assert not any(b.is_fenced for b in after.brokers)
    assert active_controller(cluster.spec) == active

    request = controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreateTopicsRequest.Topic(
                name="after-flood", num_partitions=1, replication_factor=1
            )
        ]
    )
    answer = admin_write(cluster.spec, "CreateTopics", request)
    assert answer.topics[0].error_code == 0, answer.topics[0].error_message

    log_text = (cluster.data_dir / "logs" / f"controller-{active}.log").read_text(errors="replace")
    closes = [line for line in log_text.splitlines() if "closed a Raft connection" in line]
    for bound in ("raft_handshake_frame_bytes_max", "raft_unauthenticated_connections_max"):
        lines = [line for line in closes if f'"bound": "{bound}"' in line]
        assert lines, f"no WARN line names {bound}"
        assert len(lines) <= limits.raft_guard_log_lines_max, f"{bound}: not rate-limited"
    assert not cluster.exited()

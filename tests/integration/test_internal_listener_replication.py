"""Goal: strangers holding every connection `max.connections` allows to a partition leader's
public listener do not cut the cluster's own traffic: a follower that restarts meanwhile
registers with the controller, fetches from the leader and rejoins the ISR over the internal
listeners (runtime/listeners.py), so acks=all with min.insync.replicas=2 goes on, while a new
public connection to the leader is still refused. With one listener (a cluster.json without
internal ports) the restarted follower could not reach the leader: it never rejoined the ISR
and acks=all failed with NOT_ENOUGH_REPLICAS.

Method: `samsa up`'s cluster (1 controller, 2 brokers, each with an internal listener) with
SAMSA_MAX_CONNECTIONS=6 in every process's environment; a topic of replication factor 2 and
min.insync.replicas=2. An acks=all producer connects to the leader first; then the test opens
idle connections to the leader's public port (each a channel with a local subchannel pool, so
a connection of its own, proven served by a health check) until one is refused, and holds
them; then it restarts the follower and waits for the ISR to be whole again.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster, wait_until
from grpc_health.v1 import health_pb2, health_pb2_grpc
from replication_helpers import SETTINGS, partition_state

from samsa.client import Admin, NewTopic, Producer

pytestmark = pytest.mark.timeout(300)

BOUND = 6
TRIES = BOUND + 6
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
TOPIC = "guarded"


def served(channel: grpc.Channel) -> bool:
    """Whether the service answers on this channel's connection (refused: UNAVAILABLE)."""
    try:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        return False
    return True


def fill(endpoint: str, channels: list[grpc.Channel]) -> int:
    """Open connections to `endpoint` until one is refused; the served ones stay open in
    `channels` (the refused one is closed). How many it holds now."""
    for _ in range(TRIES):
        channel = grpc.insecure_channel(endpoint, options=OWN_CONNECTION)
        if not served(channel):
            channel.close()
            return len(channels)
        channels.append(channel)
    raise AssertionError(f"{TRIES} connections to {endpoint} served: no bound in force")


def refused(endpoint: str) -> bool:
    with grpc.insecure_channel(endpoint, options=OWN_CONNECTION) as channel:
        return not served(channel)


def test_a_full_public_listener_does_not_cut_replication(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMSA_MAX_CONNECTIONS", str(BOUND))
    channels: list[grpc.Channel] = []
    with local_cluster(tmp_path, controllers=1, brokers=2, settings=SETTINGS) as cluster:
        spec = cluster.spec
        assert all(b.internal_endpoint for b in spec.brokers)  # samsa up's default
        with Admin({"bootstrap.servers": spec.bootstrap_servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 2, {"min.insync.replicas": "2"})])
        state = wait_until(
            f"{TOPIC} led with a full ISR",
            lambda: (s := partition_state(cluster, TOPIC)).leader >= 0 and len(s.isr) == 2 and s,
        )
        leader = next(b for b in spec.brokers if b.broker_id == state.leader)
        follower = next(b for b in spec.brokers if b.broker_id != state.leader)
        try:
            with Producer({"bootstrap.servers": spec.bootstrap_servers, "acks": "all"}) as p:
                p.send(TOPIC, b"before", partition=0).result(timeout=30)  # its connection first
                served_count = fill(leader.endpoint, channels)
                assert 1 <= served_count <= BOUND, served_count
                assert refused(leader.endpoint), "a stranger's next connection was served"

                cluster.kill(f"broker-{follower.broker_id}", signal.SIGTERM)
                wait_until(
                    "the follower out of the ISR",
                    lambda: partition_state(cluster, TOPIC).isr == [leader.broker_id],
                )
                # the follower reaches the leader over the internal listener only, so stopping it
                # frees no public slot: the public listener is still full when it restarts
                fill(leader.endpoint, channels)
                assert refused(leader.endpoint), "a public slot was free for the restart"
                cluster.start(f"broker-{follower.broker_id}")
                started = time.monotonic()
                wait_until(
                    "the restarted follower back in the ISR",
                    lambda: len(partition_state(cluster, TOPIC).isr) == 2,
                    timeout_s=60,
                )
                # acks=all needs both replicas: the follower fetches over the internal listener.
                p.send(TOPIC, b"after", partition=0).result(timeout=30)
                assert time.monotonic() - started < 60
                # the public bound still holds for strangers (the producer holds its slot)
                assert refused(leader.endpoint)
        finally:
            for channel in channels:
                channel.close()

"""The controller process: `python -m samsa.services.controller --node-id 1 --listen H:P ...`.

Composition only: load the cluster secret (refusing to start without one), start the Raft quorum
on the configured address (the secret is its password), serve ControllerService (plus health and
reflection) from the driver, checking brokers' membership proofs with a key derived from the
secret, fence brokers whose sessions expire while this controller is active, run the coordinators'
side (fence expired coordinator sessions, create __consumer_offsets, keep its partitions on live
coordinators; FindCoordinator is served too), and stop cleanly on SIGTERM. A fatal quorum error
(a diverged metadata log, an unreadable snapshot) exits non-zero: the operator wipes this
controller's directory and it reloads from the others.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from samsa.common import limits
from samsa.services.controller import control_plane
from samsa.services.controller.driver import LIVENESS_CHECK_INTERVAL_S, ControllerDriver
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.quorum import MetadataQuorum, RaftTimings
from samsa.services.controller.servicer import ControllerServicer
from samsa.services.runtime import logs, membership, metrics, shutdown, telemetry
from samsa.services.runtime.coordinator_lookup import (
    LOOKUP_SERVICE_NAME,
    CoordinatorLookupServicer,
)
from samsa.services.runtime.secret import ClusterSecretError, load_secret
from samsa.services.runtime.server import GrpcServer
from samsa.v1 import controller_pb2, controller_pb2_grpc, coordinator_pb2_grpc

log = logging.getLogger("samsa.controller")

# Kafka's default broker.session.timeout.ms.
SESSION_TIMEOUT_MS_DEFAULT = 9000
# Kafka checks every 300 s (leader.imbalance.check.interval.seconds); a local cluster wants its
# leaders back sooner after a restart.
LEADER_IMBALANCE_CHECK_INTERVAL_MS = 10_000


@dataclass(frozen=True)
class Peer:
    node_id: int
    raft_address: str
    endpoint: str


def parse_peers(text: str) -> list[Peer]:
    """`id=raft-host:port@grpc-host:port,...` → peers (the other controllers of the quorum)."""
    peers = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            node, addresses = item.split("=", 1)
            raft_address, endpoint = addresses.split("@", 1)
            peers.append(Peer(int(node), raft_address, endpoint))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--peers item {item!r} is not id=raft-host:port@grpc-host:port"
            ) from None
    return peers


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa.services.controller")
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--listen", required=True, help="host:port of the gRPC listener")
    parser.add_argument("--raft-address", required=True, help="host:port the Raft port binds")
    parser.add_argument("--peers", type=parse_peers, default=[], help="the other controllers")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--secret-file", type=Path, required=True)
    parser.add_argument("--cluster-id", default="samsa-local")
    parser.add_argument("--broker-session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS_DEFAULT)
    parser.add_argument(
        "--coordinator-session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS_DEFAULT
    )
    parser.add_argument(
        "--offsets-topic-num-partitions",
        type=int,
        default=control_plane.ClusterDefaults.offsets_topic_num_partitions,
        help="partitions of __consumer_offsets, fixed once it exists (groups hash over them)",
    )
    parser.add_argument(
        "--offsets-topic-replication-factor",
        type=int,
        default=control_plane.ClusterDefaults.offsets_topic_replication_factor,
        help="replicas per partition of __consumer_offsets; it is created once this many "
        "brokers are live",
    )
    parser.add_argument(
        "--transaction-state-log-num-partitions",
        type=int,
        default=control_plane.ClusterDefaults.transaction_state_log_num_partitions,
        help="partitions of __transaction_state, fixed once it exists (transactional ids hash "
        "over them)",
    )
    parser.add_argument(
        "--transaction-state-log-replication-factor",
        type=int,
        default=control_plane.ClusterDefaults.transaction_state_log_replication_factor,
        help="replicas per partition of __transaction_state; it is created once this many "
        "brokers are live",
    )
    parser.add_argument("--num-partitions", type=int, default=1)
    parser.add_argument("--default-replication-factor", type=int, default=1)
    parser.add_argument(
        "--leader-imbalance-check-interval-ms",
        type=int,
        default=LEADER_IMBALANCE_CHECK_INTERVAL_MS,
        help="how often leadership is moved back to preferred replicas (0: never)",
    )
    parser.add_argument(
        "--metadata-snapshot-entries",
        type=int,
        default=RaftTimings.compaction_entries_min,
        help="write a metadata snapshot (and trim the Raft journal) after this many entries",
    )
    metrics.add_argument(parser)
    args = parser.parse_args(argv)
    if args.metadata_snapshot_entries < 10:
        parser.error("--metadata-snapshot-entries must be at least 10")
    if args.broker_session_timeout_ms < 100:
        parser.error("--broker-session-timeout-ms must be at least 100")
    if args.coordinator_session_timeout_ms < 100:
        parser.error("--coordinator-session-timeout-ms must be at least 100")
    if not 1 <= args.offsets_topic_num_partitions <= limits.topic_partitions_max:
        parser.error(f"--offsets-topic-num-partitions must be 1 to {limits.topic_partitions_max}")
    if args.offsets_topic_replication_factor < 1:
        parser.error("--offsets-topic-replication-factor must be at least 1")
    if not 1 <= args.transaction_state_log_num_partitions <= limits.topic_partitions_max:
        parser.error(
            f"--transaction-state-log-num-partitions must be 1 to {limits.topic_partitions_max}"
        )
    if args.transaction_state_log_replication_factor < 1:
        parser.error("--transaction-state-log-replication-factor must be at least 1")
    return args


async def run(args: argparse.Namespace, password: str, tracing: bool) -> int:
    loop = asyncio.get_running_loop()
    stop = shutdown.stop_event()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    peers: list[Peer] = args.peers
    endpoints = {args.node_id: args.listen} | {peer.node_id: peer.endpoint for peer in peers}
    raft_to_node = {args.raft_address: args.node_id} | {p.raft_address: p.node_id for p in peers}
    driver = ControllerDriver(node_id=args.node_id, raft_address_to_node=raft_to_node)
    liveness = BrokerLiveness()
    coordinator_liveness = BrokerLiveness()
    driver.on_becoming_active(lambda: liveness.reset_all(_now_ms()))
    driver.on_becoming_active(lambda: coordinator_liveness.reset_all(_now_ms()))
    defaults = control_plane.ClusterDefaults(
        num_partitions=args.num_partitions,
        default_replication_factor=args.default_replication_factor,
        broker_session_timeout_ms=args.broker_session_timeout_ms,
        offsets_topic_num_partitions=args.offsets_topic_num_partitions,
        offsets_topic_replication_factor=args.offsets_topic_replication_factor,
        coordinator_session_timeout_ms=args.coordinator_session_timeout_ms,
        transaction_state_log_num_partitions=args.transaction_state_log_num_partitions,
        transaction_state_log_replication_factor=args.transaction_state_log_replication_factor,
    )
    servicer = ControllerServicer(
        driver=driver,
        liveness=liveness,
        coordinator_liveness=coordinator_liveness,
        controller_endpoints=endpoints,
        defaults=defaults,
        cluster_id=args.cluster_id,
        member_key=membership.derive_key(password),
    )
    server = GrpcServer(
        args.listen,
        service_names=[
            controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name,
            LOOKUP_SERVICE_NAME,
        ],
        tracing=tracing,
    )
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server.server)
    coordinator_pb2_grpc.add_CoordinatorLookupServiceServicer_to_server(
        CoordinatorLookupServicer(
            image=lambda: driver.image,
            offsets_topic_replication_factor=defaults.offsets_topic_replication_factor,
            transaction_state_log_replication_factor=(
                defaults.transaction_state_log_replication_factor
            ),
        ),
        server.server,
    )
    await server.start()
    quorum = MetadataQuorum(
        raft_address=args.raft_address,
        peer_raft_addresses=[peer.raft_address for peer in peers],
        data_dir=args.data_dir,
        password=password,
        listener=driver,
        loop=loop,
        timings=RaftTimings(compaction_entries_min=args.metadata_snapshot_entries),
    )
    driver.attach(quorum)
    fencing = asyncio.create_task(
        _fence_expired_brokers(driver, liveness, args.broker_session_timeout_ms)
    )
    rebalancing = asyncio.create_task(
        _rebalance_leaders(driver, args.leader_imbalance_check_interval_ms)
    )
    coordinating = asyncio.create_task(_run_coordinators(driver, coordinator_liveness, defaults))
    log.info("controller started", extra={"node_id": args.node_id, "listen": args.listen})
    assert driver.fatal is not None
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({stopped, driver.fatal}, return_when=asyncio.FIRST_COMPLETED)
    exit_code = 0
    if driver.fatal in done:
        log.critical("stopping: %s", driver.fatal.result())
        exit_code = 3
    fencing.cancel()
    rebalancing.cancel()
    coordinating.cancel()
    stopped.cancel()
    await server.stop(grace_s=2.0)
    await asyncio.to_thread(quorum.destroy)
    log.info("controller stopped")
    return exit_code


async def _fence_expired_brokers(
    driver: ControllerDriver, liveness: BrokerLiveness, session_timeout_ms: int
) -> None:
    """While active, fence brokers whose sessions expired (their leaderships move)."""
    while True:
        await asyncio.sleep(LIVENESS_CHECK_INTERVAL_S)
        if not driver.active:
            continue
        registered = {
            broker_id: broker.broker_epoch
            for broker_id, broker in driver.image.brokers.items()
            if not broker.fenced
        }
        expired = liveness.expired(_now_ms(), session_timeout_ms, registered)
        live_expired = [
            broker_id
            for broker_id in expired
            if (broker := driver.image.brokers.get(broker_id)) is not None and not broker.fenced
        ]
        if not live_expired:
            continue
        log.warning("broker sessions expired, fencing", extra={"brokers": live_expired})
        try:
            await driver.write(
                lambda image, ids=tuple(live_expired): control_plane.fence_brokers(image, ids)
            )
        except Exception:
            log.exception("fencing failed")


async def _run_coordinators(
    driver: ControllerDriver, liveness: BrokerLiveness, defaults: control_plane.ClusterDefaults
) -> None:
    """While active, every LIVENESS_CHECK_INTERVAL_S: fence coordinators whose sessions expired
    (their partitions move in the same batch), create __consumer_offsets and
    __transaction_state once they can be, and give their partitions to live coordinators.
    Registration and fencing plan assignments in their own batches already; this loop catches
    what they could not (a topic appearing, a write that failed, a new active controller taking
    over)."""
    assert LIVENESS_CHECK_INTERVAL_S <= 0.5, "coordinators should not wait long for partitions"
    rng = random.Random()
    while True:
        await asyncio.sleep(LIVENESS_CHECK_INTERVAL_S)
        if not driver.active:
            continue
        try:
            await _coordinator_round(driver, liveness, defaults, rng)
        except Exception:
            log.exception("coordinator housekeeping failed")


async def _coordinator_round(
    driver: ControllerDriver,
    liveness: BrokerLiveness,
    defaults: control_plane.ClusterDefaults,
    rng: random.Random,
) -> None:
    live = {c.coordinator_id: c.coordinator_epoch for c in driver.image.live_coordinators()}
    expired = [
        coordinator_id
        for coordinator_id in liveness.expired(
            _now_ms(), defaults.coordinator_session_timeout_ms, live
        )
        if coordinator_id in live
    ]
    if expired:
        log.warning("coordinator sessions expired, fencing", extra={"coordinators": expired})
        await driver.write(
            lambda image, ids=tuple(expired): control_plane.fence_coordinators(image, ids)
        )
        for coordinator_id in expired:
            liveness.forget(coordinator_id)
    await driver.write(
        lambda image: control_plane.plan_coordinator_topics(
            image, defaults, rng=rng, new_topic_id=lambda: uuid.uuid4().bytes
        )
    )
    await driver.write(control_plane.plan_coordinator_assignments)


async def _rebalance_leaders(driver: ControllerDriver, interval_ms: int) -> None:
    """While active, give leadership back to preferred replicas (auto.leader.rebalance)."""
    if interval_ms <= 0:
        return
    while True:
        await asyncio.sleep(interval_ms / 1000)
        if not driver.active:
            continue
        try:
            await driver.write(control_plane.preferred_leader_elections)
        except Exception:
            log.exception("preferred leader election failed")


def _now_ms() -> int:
    return int(time.time() * 1000)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(f"controller-{args.node_id}")
    try:
        password = load_secret(args.secret_file)
    except ClusterSecretError as error:
        print(f"samsa controller: {error}", file=sys.stderr)
        return 2
    tracing = telemetry.configure(f"samsa-controller-{args.node_id}")
    try:
        served = metrics.serve(args.metrics_listen, f"samsa-controller-{args.node_id}")
    except metrics.MetricsConfigError as error:
        print(f"samsa controller: {error}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(args, password, tracing))
    finally:
        if served is not None:
            served.shutdown()

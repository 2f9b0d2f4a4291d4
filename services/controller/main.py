"""The controller process: `python -m samsa.services.controller --node-id 1 --listen H:P ...`.

Composition only: load the config (flags, SAMSA_* variables, --config file: ControllerConfig; a
bad setting stops it at once with one line naming the key), load the cluster secret (refusing to
start without one), start the Raft quorum
on the configured address (the secret is its password), serve ControllerService (plus health and
reflection) from the driver, checking brokers' membership proofs with a key derived from the
secret, fence brokers whose sessions expire while this controller is active, run the coordinators'
side (fence expired coordinator sessions, create __consumer_offsets, keep its partitions on live
coordinators; FindCoordinator is served too), write the SCRAM bootstrap file's credentials the
image lacks each time it becomes active (scram_bootstrap_file.py; a bad file stops it at start),
and stop cleanly on SIGTERM. A fatal quorum error
(a diverged metadata log, an unreadable snapshot) exits non-zero: the operator wipes this
controller's directory and it reloads from the others. The background loops (broker fencing,
leader rebalancing, completing partition reassignments, the coordinators' side) are restarted
after an unexpected error
(services/runtime/supervisor.py), where one used to stay dead until the process stopped.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
import uuid
from functools import partial
from pathlib import Path

from samsa.metadata.image import MetadataImage
from samsa.services.controller import control_plane
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.controller.driver import LIVENESS_CHECK_INTERVAL_S, ControllerDriver
from samsa.services.controller.liveness import BrokerLiveness
from samsa.services.controller.quorum import MetadataQuorum, RaftTimings
from samsa.services.controller.reassignment_control import topics_reassigning
from samsa.services.controller.scram_bootstrap import BootstrapFileError
from samsa.services.controller.scram_bootstrap_file import (
    load_bootstrap_credentials,
    write_on_activation,
)
from samsa.services.controller.servicer import ControllerServicer
from samsa.services.runtime import membership, shutdown
from samsa.services.runtime.authorization import AuthorizerConfig
from samsa.services.runtime.config import with_bound_port
from samsa.services.runtime.coordinator_lookup import (
    LOOKUP_SERVICE_NAME,
    CoordinatorLookupServicer,
)
from samsa.services.runtime.listeners import Listeners
from samsa.services.runtime.sasl_gate import SaslConfig
from samsa.services.runtime.server import check_bindable
from samsa.services.runtime.service_process import run_service
from samsa.services.runtime.supervisor import supervise
from samsa.v1 import controller_pb2, controller_pb2_grpc, coordinator_pb2_grpc

log = logging.getLogger("samsa.controller")

# How long the reassignment completion loop sleeps when no commit wakes it (see its doc).
REASSIGNMENT_IDLE_CHECK_S = 1.0


async def run(config: ControllerConfig, password: str, tracing: bool) -> int:
    loop = asyncio.get_running_loop()
    stop = shutdown.stop_event()
    bootstrap_credentials = {}
    if config.sasl_scram_bootstrap_credentials is not None:
        try:  # a bad file stops the controller before it serves anything, as a bad setting
            path = Path(config.sasl_scram_bootstrap_credentials)
            bootstrap_credentials = await asyncio.to_thread(load_bootstrap_credentials, path)
        except BootstrapFileError as error:
            print(f"samsa controller: {error}", file=sys.stderr)
            return 2
    data_dir = Path(config.metadata_log_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    # The Raft port's library retries a failed bind every second, in silence: a controller on
    # a taken raft.address would serve for ever without taking part in the quorum.
    check_bindable(config.raft_address, "raft.address")
    peers = config.peers
    # What DescribeCluster lists: the addresses others dial (this one may listen on 0.0.0.0).
    endpoints = {config.node_id: config.advertised_listener} | {
        peer.node_id: peer.endpoint for peer in peers
    }
    internal_endpoints = {
        peer.node_id: peer.internal_endpoint for peer in peers if peer.internal_endpoint
    }
    raft_to_node = {config.raft_address: config.node_id} | {
        peer.raft_address: peer.node_id for peer in peers
    }
    driver = ControllerDriver(node_id=config.node_id, raft_address_to_node=raft_to_node)
    liveness = BrokerLiveness()
    coordinator_liveness = BrokerLiveness()
    driver.on_becoming_active(lambda: liveness.reset_all(_now_ms(), driver.image.brokers))
    driver.on_becoming_active(lambda: coordinator_liveness.reset_all(_now_ms()))
    defaults = control_plane.ClusterDefaults(
        num_partitions=config.num_partitions,
        default_replication_factor=config.default_replication_factor,
        broker_session_timeout_ms=config.broker_session_timeout_ms,
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
        offsets_topic_replication_factor=config.offsets_topic_replication_factor,
        coordinator_session_timeout_ms=config.coordinator_session_timeout_ms,
        transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
        transaction_state_log_replication_factor=config.transaction_state_log_replication_factor,
        transaction_state_log_min_isr=config.transaction_state_log_min_isr,
    )
    authorizer = AuthorizerConfig.of(config)
    servicer = ControllerServicer(
        driver=driver,
        liveness=liveness,
        coordinator_liveness=coordinator_liveness,
        controller_endpoints=endpoints,
        defaults=defaults,
        cluster_id=config.cluster_id,
        member_key=membership.derive_key(password),
        controller_internal_endpoints=internal_endpoints,
        authorizer_enabled=config.authorizer_enabled,
    )
    server = Listeners(
        config.listeners,
        service_names=[
            controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name,
            LOOKUP_SERVICE_NAME,
        ],
        tracing=tracing,
        health_file=config.health_file,
        connections_max=config.max_connections,
        internal_listen=config.internal_listeners,
        authorization=None
        if authorizer is None
        else authorizer.authorization(servicer.member_key, acls=lambda: driver.image.acls),
        sasl=SaslConfig.of(config).bind(
            servicer.member_key, lambda: driver.image.scram_credentials
        ),
    )
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server.handlers)
    coordinator_pb2_grpc.add_CoordinatorLookupServiceServicer_to_server(
        CoordinatorLookupServicer(
            image=lambda: driver.image,
            offsets_topic_replication_factor=defaults.offsets_topic_replication_factor,
            transaction_state_log_replication_factor=(
                defaults.transaction_state_log_replication_factor
            ),
        ),
        server.handlers,
    )
    await server.start()
    # listeners=HOST:0 (any free port) advertises the port bound, not one nobody can dial.
    servicer.controller_endpoints[config.node_id] = with_bound_port(
        config.advertised_listener, server.port
    )
    if config.internal_advertised_listener is not None and server.internal_port is not None:
        servicer.controller_internal_endpoints[config.node_id] = with_bound_port(
            config.internal_advertised_listener, server.internal_port
        )
    quorum = MetadataQuorum(
        raft_address=config.raft_address,
        peer_raft_addresses=[peer.raft_address for peer in peers],
        data_dir=data_dir,
        password=password,
        listener=driver,
        loop=loop,
        timings=RaftTimings(compaction_entries_min=config.metadata_snapshot_entries),
    )
    driver.attach(quorum)
    bootstrapping = (
        write_on_activation(driver, bootstrap_credentials) if bootstrap_credentials else None
    )
    # Supervised: one that raises is logged and started again (supervisor.py), not dead for good.
    fencing = asyncio.create_task(
        supervise(
            "fence-expired-brokers",
            lambda: _fence_expired_brokers(driver, liveness, config.broker_session_timeout_ms),
        )
    )
    rebalancing = asyncio.create_task(
        supervise(
            "rebalance-leaders",
            lambda: _rebalance_leaders(driver, config.leader_imbalance_check_interval_ms),
        )
    )
    reassigning = asyncio.create_task(
        supervise("complete-reassignments", lambda: _complete_reassignments(driver))
    )
    coordinating = asyncio.create_task(
        supervise(
            "coordinator-housekeeping",
            lambda: _run_coordinators(driver, coordinator_liveness, defaults),
        )
    )
    log.info(
        "controller started",
        extra={
            "node_id": config.node_id,
            "listen": config.listeners,
            "advertised_listener": servicer.controller_endpoints[config.node_id],
            "internal_advertised_listener": servicer.controller_internal_endpoints.get(
                config.node_id
            ),
        },
    )
    assert driver.fatal is not None
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({stopped, driver.fatal}, return_when=asyncio.FIRST_COMPLETED)
    exit_code = 0
    if driver.fatal in done:
        log.critical("stopping: %s", driver.fatal.result())
        exit_code = 3
    fencing.cancel()
    rebalancing.cancel()
    reassigning.cancel()
    coordinating.cancel()
    if bootstrapping is not None:
        bootstrapping.cancel()
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
        live_expired = _expired_brokers(driver.image, liveness, session_timeout_ms)
        if not live_expired:
            continue
        log.warning("broker sessions expired, fencing", extra={"brokers": live_expired})
        try:
            # Decided again once the write lock is held: a heartbeat that arrived while an
            # earlier write committed keeps its broker.
            await driver.write(
                lambda image: control_plane.fence_brokers(
                    image, _expired_brokers(image, liveness, session_timeout_ms)
                )
            )
        except Exception:
            log.exception("fencing failed")


def _expired_brokers(
    image: MetadataImage, liveness: BrokerLiveness, session_timeout_ms: int
) -> list[int]:
    """The unfenced brokers of `image` whose sessions have expired now."""
    registered = {
        broker_id: broker.broker_epoch
        for broker_id, broker in image.brokers.items()
        if not broker.fenced
    }
    expired = liveness.expired(_now_ms(), session_timeout_ms, registered)
    return [broker_id for broker_id in expired if broker_id in registered]


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
    timeout_ms = defaults.coordinator_session_timeout_ms
    expired = _expired_coordinators(driver.image, liveness, timeout_ms)
    if expired:
        log.warning("coordinator sessions expired, fencing", extra={"coordinators": expired})
        fenced: list[int] = []

        def fence(image: MetadataImage) -> control_plane.ControlResult[None]:
            # Decided again once the write lock is held, like brokers' (_fence_expired_brokers).
            fenced[:] = _expired_coordinators(image, liveness, timeout_ms)
            return control_plane.fence_coordinators(image, fenced)

        await driver.write(fence)
        for coordinator_id in fenced:
            liveness.forget(coordinator_id)
    await driver.write(
        lambda image: control_plane.plan_coordinator_topics(
            image, defaults, rng=rng, new_topic_id=lambda: uuid.uuid4().bytes
        )
    )
    await driver.write(control_plane.plan_coordinator_assignments)


def _expired_coordinators(
    image: MetadataImage, liveness: BrokerLiveness, session_timeout_ms: int
) -> list[int]:
    """The unfenced coordinators of `image` whose sessions have expired now."""
    live = {c.coordinator_id: c.coordinator_epoch for c in image.live_coordinators()}
    expired = liveness.expired(_now_ms(), session_timeout_ms, live)
    return [coordinator_id for coordinator_id in expired if coordinator_id in live]


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


async def _complete_reassignments(driver: ControllerDriver) -> None:
    """While active, after every change of the image, complete the partition reassignments it
    allows (every added replica in the ISR: reassignment_control.py).

    Why a loop woken by commits rather than inside AlterPartition: the ISR expansion is one
    trigger among several (a broker unfenced to take over a removed leader, a new target that
    is in sync already, a new active controller inheriting reassignments), and AlterPartition's
    answer tells the leader the ISR it proposed; completing in the same record would change
    that ISR and the leadership under it. One more Raft commit per reassignment is nothing; the
    check after each commit looks only into the topics it changed and those moving
    (`topics_reassigning`). The idle timeout catches a change that landed while the previous
    completion was written."""
    seen = MetadataImage.empty()
    reassigning: frozenset[str] = frozenset()
    while True:
        if driver.image is seen:
            await driver.wait_for_change(REASSIGNMENT_IDLE_CHECK_S)
        image = driver.image
        reassigning = topics_reassigning(seen, image, reassigning)
        seen = image
        if not driver.active or not reassigning:
            continue
        try:
            await driver.write(partial(control_plane.complete_reassignments, topics=reassigning))
        except Exception:
            log.exception("completing partition reassignments failed")


def _now_ms() -> int:
    return int(time.time() * 1000)


def main(argv: list[str] | None = None) -> int:
    return run_service(
        "controller",
        ControllerConfig,
        argv,
        lambda config: config.node_id,
        run,
        data_dir=lambda config: config.metadata_log_dir,
    )

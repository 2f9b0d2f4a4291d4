"""The broker process's composition: metadata in, partitions hosted, BrokerService served.

MetadataFollower registers, heartbeats and replays the metadata log; every new image goes
through `metadata_diff.partition_changes` to the PartitionHost, which opens, leads, follows or
deletes partition logs. Once this broker is unfenced (it has caught up with the log), directories
of partitions it no longer hosts are removed. On SIGTERM it asks the controller to move its
leaderships away (controlled shutdown), stops serving, closes every log (checkpoints written),
and only then writes its clean-shutdown file, which the next start reads and deletes before it
registers, once its listeners are bound (clean_shutdown.py, KIP-966: a start that cannot bind
one touched no log and leaves the file); so it does, exiting 3, when following the metadata log
failed (metadata_follower.py). Its background loops (maintenance, log cleaner, ISR manager,
scrubber) are supervised: one that raises is logged and started again after a backoff
(services/runtime/supervisor.py), where it used to stay dead until shutdown.
Besides BrokerService it serves FindCoordinator, answered from that same image, and
ControllerService for clients that bootstrap from brokers: metadata reads from that image, admin
writes forwarded to the active controller (metadata_servicer.py, KIP-590).

The membership key (derived from the cluster secret) goes both ways: its calls to the controllers
and its replica fetches are signed with it as this broker, and its Fetch refuses a replica_id
whose caller cannot prove the same (services/runtime/membership.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from pathlib import Path

from opentelemetry import trace

from samsa.common import limits
from samsa.metadata.image import MetadataImage
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.broker.broker_config import (
    FETCH_ANSWERS_BYTES_MAX_DEFAULT,
    LOG_CLEANER_BACKOFF_MS_DEFAULT,
    LOG_RETENTION_CHECK_INTERVAL_MS_DEFAULT,
    REPLICA_LAG_TIME_MAX_MS_DEFAULT,
)
from samsa.services.broker.clean_shutdown import mark_clean_shutdown, take_previous_broker_epoch
from samsa.services.broker.log_cleaner import run_log_cleaner
from samsa.services.broker.maintenance import run_maintenance
from samsa.services.broker.metadata.metadata_diff import changed_topics, partition_changes
from samsa.services.broker.metadata.metadata_follower import MetadataFollower
from samsa.services.broker.metadata.metadata_servicer import BrokerMetadataServicer
from samsa.services.broker.partition_host import PartitionHost
from samsa.services.broker.record_trace import TRACER_NAME, RecordTracer
from samsa.services.broker.replica.isr_manager import run_isr_manager
from samsa.services.broker.replica.replica_fetcher import ReplicaFetchers
from samsa.services.broker.requests.answer_gate import AnswerGate
from samsa.services.broker.requests.answer_write_deadline import AnswerWriteDeadline
from samsa.services.broker.requests.producer_ids import ProducerIdManager
from samsa.services.broker.requests.txn_verification import TransactionVerifier
from samsa.services.broker.scrubber import (
    SCRUB_BYTES_PER_SECOND_DEFAULT,
    SCRUB_INTERVAL_MS_DEFAULT,
    run_scrubber,
)
from samsa.services.broker.servicer import BrokerServicer, add_broker_service
from samsa.services.runtime.authorization import AuthorizerConfig
from samsa.services.runtime.config import with_bound_port
from samsa.services.runtime.controller_channel import ControllerChannel
from samsa.services.runtime.coordinator_lookup import (
    LOOKUP_SERVICE_NAME,
    CoordinatorLookupServicer,
)
from samsa.services.runtime.listeners import Listeners
from samsa.services.runtime.member_auth import MemberSigner
from samsa.services.runtime.sasl_gate import SASL_OFF, SaslConfig
from samsa.services.runtime.stream_answers import Draining
from samsa.services.runtime.supervisor import supervise
from samsa.v1 import (
    broker_pb2,
    controller_pb2,
    controller_pb2_grpc,
    coordinator_pb2_grpc,
)

log = logging.getLogger(__name__)

STOP_GRACE_S = 2.0
# After its controlled shutdown a broker leads nothing, and its produce and marker streams end
# (services/runtime/stream_answers.py: draining) only this much later. Clients learn the new
# leaders from the answers to what they already sent (NOT_LEADER_OR_FOLLOWER naming the new
# leader, KIP-951); a request sent before that answer came must still get one, not a closed
# stream, which costs a producer its retry backoff (a rolling restart measured 84-105 ms
# stalls with the streams ended at once, 11-16 ms with them answering).
DRAIN_DELAY_S = 0.5
APPLY_SLICE = 25  # partition actions applied between two yields (about 20-60 ms of work)
# The exit code of a broker that stopped because following the metadata log failed (as a
# controller's fatal quorum error): its supervisor restarts it, and it reads the log afresh.
EXIT_METADATA_FAILED = 3


class Broker:
    def __init__(
        self,
        *,
        broker_id: int,
        listen: str,
        controllers: list[str],
        data_dir: Path,
        advertised_listener: str | None = None,
        rack: str,
        heartbeat_interval_ms: int,
        member_key: bytes,
        replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS_DEFAULT,
        tracing: bool = False,
        log_scrub_bytes_per_second: int = SCRUB_BYTES_PER_SECOND_DEFAULT,
        log_scrub_interval_ms: int = SCRUB_INTERVAL_MS_DEFAULT,
        log_cleaner_backoff_ms: int = LOG_CLEANER_BACKOFF_MS_DEFAULT,
        log_retention_check_interval_ms: int = LOG_RETENTION_CHECK_INTERVAL_MS_DEFAULT,
        health_file: str | None = None,
        connections_max: int = limits.grpc_connections_max,
        internal_listen: str | None = None,
        internal_advertised_listener: str | None = None,
        authorizer: AuthorizerConfig | None = None,
        sasl: SaslConfig = SASL_OFF,
        principal_rules: PrincipalRules | None = None,
        fetch_answers_bytes_max: int = FETCH_ANSWERS_BYTES_MAX_DEFAULT,
        fetch_answer_write_timeout_ms: int = limits.fetch_answer_write_ms_max,
    ) -> None:
        # Consumers' fetch answers held at once (requests/answer_budget.py).
        # ... and how long one may hold them unwritten (requests/answer_write_deadline.py).
        self.answer_gate = AnswerGate(
            fetch_answers_bytes_max, AnswerWriteDeadline(fetch_answer_write_timeout_ms)
        )
        self.health_file = health_file
        # The internal listener (runtime/listeners.py), and what members dial for it.
        self.internal_listen = internal_listen
        self.internal_advertised_listener = internal_advertised_listener or internal_listen
        self.connections_max = connections_max
        self.authorizer = authorizer  # None: ACLs off (authorization.py)
        self.sasl = sasl  # SASL/SCRAM and its gate (sasl_gate.py); off by default
        # Who a client is for the client quotas (quota_throttle.py), with the authorizer or not.
        self.principal_rules = principal_rules
        self.log_cleaner_backoff_ms = log_cleaner_backoff_ms
        self.log_retention_check_interval_ms = log_retention_check_interval_ms
        self.log_scrub_bytes_per_second = log_scrub_bytes_per_second
        self.log_scrub_interval_ms = log_scrub_interval_ms
        self.tracing = tracing
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.broker_id = broker_id
        self.listen = listen
        # What the broker registers: the address others dial (listen may be 0.0.0.0:PORT).
        self.advertised_listener = advertised_listener or listen
        self.host = PartitionHost(data_dir, broker_id)
        if tracing:
            self.host.record_tracer = RecordTracer(
                trace.get_tracer(TRACER_NAME), time.time_ns, broker_id
            )
        self.member_key = member_key
        signer = MemberSigner(member_key, broker_id)
        self.channel = ControllerChannel(controllers, signer)
        self.follower = MetadataFollower(
            broker_id=broker_id,
            endpoint=self.advertised_listener,
            rack=rack,
            controllers=self.channel,
            on_change=self._on_change,
            heartbeat_interval_ms=heartbeat_interval_ms,
        )
        self._strays_removed = False
        self.fetchers = ReplicaFetchers(self.host, broker_id, signer)
        self.host.on_repaired = self.fetchers.repaired
        self.producer_ids = ProducerIdManager(
            broker_id, self.channel, lambda: self.follower.broker_epoch
        )
        # KIP-890: transactional produce is checked with the coordinator of its id.
        self.txn_verifier = TransactionVerifier(lambda: self.follower.image, signer)

    async def _on_change(self, old: MetadataImage, new: MetadataImage) -> None:
        actions = partition_changes(old, new, self.broker_id)
        # Opening a new log costs about a millisecond: a topic of thousands of partitions is
        # applied a slice at a time, so that heartbeats and requests run in between (a broker
        # that stalls for its session timeout is fenced, and every leadership moves).
        self.host.apply(new, actions[:APPLY_SLICE], int(time.time() * 1000))
        for start in range(APPLY_SLICE, len(actions), APPLY_SLICE):
            await asyncio.sleep(0)
            self.host.apply(new, actions[start : start + APPLY_SLICE], int(time.time() * 1000))
        self.fetchers.reconcile(
            {(action.topic, action.partition) for action in actions}
            | self.host.partitions_of(changed_topics(old, new))
        )
        me = new.brokers.get(self.broker_id)
        caught_up = (
            me is not None and not me.fenced and me.broker_epoch == self.follower.broker_epoch
        )
        if caught_up and not self._strays_removed:
            self._strays_removed = True
            removed = self.host.remove_strays()
            if removed:
                log.info("removed logs of deleted partitions", extra={"dirs": removed})

    def _background_loops(
        self, stop: asyncio.Event
    ) -> dict[str, Callable[[], Coroutine[object, object, None]]]:
        """The loops `run` supervises (restarted after an unexpected error, supervisor.py), by
        name; each returns once `stop` is set."""
        return {
            "maintenance": lambda: run_maintenance(
                self.host, stop, retention_interval_s=self.log_retention_check_interval_ms / 1000
            ),
            "log-cleaner": lambda: run_log_cleaner(
                self.host, stop, interval_s=self.log_cleaner_backoff_ms / 1000
            ),
            "isr-manager": lambda: run_isr_manager(
                self.host,
                self.channel,
                lambda: self.follower.broker_epoch,
                stop,
                lag_max_ms=self.replica_lag_time_max_ms,
            ),
            "scrubber": lambda: run_scrubber(
                self.host,
                self.channel,
                lambda: self.follower.broker_epoch,
                stop,
                bytes_per_second=self.log_scrub_bytes_per_second,
                interval_ms=self.log_scrub_interval_ms,
            ),
        }

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop`; the exit code (EXIT_METADATA_FAILED: following the log failed)."""
        service = broker_pb2.DESCRIPTOR.services_by_name["BrokerService"].full_name
        metadata_service = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name
        draining = Draining()
        servicer = BrokerServicer(
            self.host,
            member_key=self.member_key,
            producer_ids=self.producer_ids,
            txn_verifier=self.txn_verifier,
            draining=draining,
            answer_gate=self.answer_gate,
            principal_rules=self.principal_rules,
        )
        if self.answer_gate.write_deadline is not None:  # before the server: see its module doc
            self.answer_gate.write_deadline.install(asyncio.get_running_loop())
        server = Listeners(
            self.listen,
            [service, LOOKUP_SERVICE_NAME, metadata_service],
            tracing=self.tracing,
            health_file=self.health_file,
            connections_max=self.connections_max,
            internal_listen=self.internal_listen,
            authorization=None
            if self.authorizer is None
            else self.authorizer.authorization(
                self.member_key,
                acls=lambda: self.follower.image.acls,
                topic_name=lambda topic_id: self.follower.image.topic_names.get(topic_id),
            ),
            sasl=self.sasl.bind(self.member_key, lambda: self.follower.image.scram_credentials),
        )
        add_broker_service(servicer, server.handlers)
        # FindCoordinator from this broker's image: a client asks whichever broker it knows.
        coordinator_pb2_grpc.add_CoordinatorLookupServiceServicer_to_server(
            CoordinatorLookupServicer(
                image=lambda: self.follower.image, offsets_topic_replication_factor=None
            ),
            server.handlers,
        )
        # Metadata reads and forwarded admin writes, for clients bootstrapped from brokers.
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(
            BrokerMetadataServicer(
                broker_id=self.broker_id, metadata=self.follower.log, controllers=self.channel
            ),
            server.handlers,
        )
        await server.start()
        # Before registering: whether the last run closed every log (KIP-966, clean_shutdown.py).
        # Only once listening: a run that cannot bind a listener (ServerStartError) touched no
        # log, and must leave the file for the next start, or that one registers unclean.
        self.follower.previous_broker_epoch = take_previous_broker_epoch(self.host.data_dir)
        # listeners=HOST:0 (any free port) advertises the port bound, not one nobody can dial.
        self.advertised_listener = with_bound_port(self.advertised_listener, server.port)
        self.follower.endpoint = self.advertised_listener
        if self.internal_advertised_listener is not None and server.internal_port is not None:
            self.internal_advertised_listener = with_bound_port(
                self.internal_advertised_listener, server.internal_port
            )
            self.follower.internal_endpoint = self.internal_advertised_listener
        log.info(
            "broker serving",
            extra={
                "broker_id": self.broker_id,
                "listen": self.listen,
                "advertised_listener": self.advertised_listener,
                "internal_advertised_listener": self.internal_advertised_listener,
            },
        )
        follower_stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self.follower.run(follower_stop), name="metadata"),
            *(
                asyncio.create_task(supervise(name, run, stop=stop), name=name)
                for name, run in self._background_loops(stop).items()
            ),
        ]
        following = tasks[0]
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, following], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        failed = following.done() and not stop.is_set()
        if failed:  # its image stands still: stop rather than serve and lead from it
            log.critical(
                "stopping: following the metadata log failed", exc_info=following.exception()
            )
            stop.set()  # the other loops end too
        log.info("controlled shutdown: moving leaderships away")
        await self.follower.shutdown()
        follower_stop.set()
        if draining.streams_open:
            await asyncio.sleep(DRAIN_DELAY_S)
        draining.set()
        await server.stop(STOP_GRACE_S)
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.fetchers.close()
        await self.producer_ids.close()
        await self.txn_verifier.close()
        self.host.close_all()
        mark_clean_shutdown(self.host.data_dir, self.follower.broker_epoch)  # every log closed
        await self.channel.close()
        log.info("broker stopped")
        return EXIT_METADATA_FAILED if failed else 0

"""The command line that starts each process of a local cluster (launcher.py spawns them): its
ids, listeners, data directory and the cluster secret, the settings of cluster.json that apply
to its kind of service, and, for a SASL cluster, the controllers' bootstrap file. The security
flags every process shares come from ClusterSpec.service_security. Pure: it only builds lists.
"""

from __future__ import annotations

import sys
from pathlib import Path

from samsa.cli.cluster_spec import (
    SASL_BOOTSTRAP_FILE,
    TLS_DIR,
    BrokerSpec,
    ClusterSpec,
    ControllerSpec,
    CoordinatorSpec,
)


def controller_command(spec: ClusterSpec, controller: ControllerSpec, data_dir: Path) -> list[str]:
    peers = ",".join(
        f"{peer.node_id}={peer.raft_address}@{peer.endpoint}"
        + (f"@{peer.internal_endpoint}" if peer.internal_endpoint else "")
        for peer in spec.controllers
        if peer.node_id != controller.node_id
    )
    command = [sys.executable, "-m", "samsa.services.controller"]
    command += ["--node-id", str(controller.node_id), "--listen", controller.endpoint]
    command += _internal_listener(controller.internal_endpoint)
    command += ["--raft-address", controller.raft_address, "--peers", peers]
    command += ["--data-dir", str(data_dir / f"controller-{controller.node_id}")]
    command += ["--secret-file", str(data_dir / "cluster.secret")]
    # Kafka's default RF for __consumer_offsets and __transaction_state is 3; a smaller local
    # cluster uses all its brokers.
    replication = str(min(3, max(1, len(spec.brokers))))
    command += ["--offsets-topic-replication-factor", replication]
    command += ["--transaction-state-log-replication-factor", replication]
    for name in (
        "broker.session.timeout.ms",
        "metadata.snapshot.entries",
        "leader.imbalance.check.interval.ms",
        "offsets.topic.num.partitions",
        "offsets.topic.replication.factor",
        "transaction.state.log.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "coordinator.session.timeout.ms",
        "sasl.scram.bootstrap.credentials",
        *OAUTHBEARER_SETTINGS,
    ):
        if name in spec.settings:
            command += [f"--{name.replace('.', '-')}", spec.settings[name]]
    if spec.sasl and "sasl.scram.bootstrap.credentials" not in spec.settings:
        bootstrap = data_dir / TLS_DIR / SASL_BOOTSTRAP_FILE  # admin (cluster_tls.py)
        command += ["--sasl-scram-bootstrap-credentials", str(bootstrap)]
    return command


# The OAUTHBEARER settings every service of a SASL cluster takes from cluster.json's settings
# (sasl.enabled.mechanisms itself comes with the TLS flags: cluster_spec.service_security).
OAUTHBEARER_SETTINGS = (
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
)


def broker_command(spec: ClusterSpec, broker: BrokerSpec, data_dir: Path) -> list[str]:
    command = [sys.executable, "-m", "samsa.services.broker"]
    command += ["--broker-id", str(broker.broker_id), "--listen", broker.endpoint]
    command += _internal_listener(broker.internal_endpoint)
    command += ["--controllers", spec.member_bootstrap_servers]
    command += ["--data-dir", str(data_dir / f"broker-{broker.broker_id}")]
    command += ["--secret-file", str(data_dir / "cluster.secret")]
    if broker.rack:
        command += ["--rack", broker.rack]
    for name in (
        "broker.heartbeat.interval.ms",
        "replica.lag.time.max.ms",
        "log.scrub.bytes.per.second",
        "log.scrub.interval.ms",
        "log.cleaner.backoff.ms",
        "log.retention.check.interval.ms",
        "fetch.answers.bytes.max",
        "fetch.answer.write.timeout.ms",
        *OAUTHBEARER_SETTINGS,
    ):
        if name in spec.settings:
            command += [f"--{name.replace('.', '-')}", spec.settings[name]]
    return command


def coordinator_command(
    spec: ClusterSpec, coordinator: CoordinatorSpec, data_dir: Path
) -> list[str]:
    command = [sys.executable, "-m", "samsa.services.coordinator"]
    command += ["--coordinator-id", str(coordinator.coordinator_id)]
    command += ["--listen", coordinator.endpoint, "--controllers", spec.member_bootstrap_servers]
    command += _internal_listener(coordinator.internal_endpoint)
    command += ["--secret-file", str(data_dir / "cluster.secret")]
    for name in (
        "coordinator.heartbeat.interval.ms",
        "coordinator.session.timeout.ms",
        "group.consumer.session.timeout.ms",
        "group.consumer.heartbeat.interval.ms",
        "offsets.retention.minutes",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transactional.id.expiration.ms",
        "transaction.max.timeout.ms",
        *OAUTHBEARER_SETTINGS,
    ):
        if name in spec.settings:
            command += [f"--{name.replace('.', '-')}", spec.settings[name]]
    return command


def _internal_listener(endpoint: str | None) -> list[str]:
    return [] if endpoint is None else ["--internal-listeners", endpoint]

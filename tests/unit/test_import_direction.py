"""Goal: keep the architecture's arrows pointing one way (STYLE.md habit 1, DESIGN.md §10).

Method: parse every module's imports with `ast` (nothing is imported or executed) and check three
rules:
1. `samsa.common` and `samsa.metadata` import nothing from `samsa.services`, `samsa.client` or
   `samsa.cli`.
2. Services and clients never import each other.
3. Pure cores do no I/O: they import none of the modules in FORBIDDEN_IN_CORES. Every module under
   common/, metadata/ and services/ is a pure core unless its file name is in IO_MODULE_NAMES — so
   a new module is pure by default, and a reviewer sees every I/O module named here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Top-level folder -> the import prefix it is installed as (pyproject.toml's package-dir).
PACKAGE_FOLDERS = {
    "common": "samsa.common",
    "metadata": "samsa.metadata",
    "services": "samsa.services",
    "clients/python/samsa_client": "samsa.client",
    "clients/python/cli": "samsa.cli",
    "clients/spark/samsa_spark": "samsa.spark",
}

FORBIDDEN_IN_CORES = {
    "asyncio",
    "grpc",
    "io",
    "mmap",
    "multiprocessing",
    "os",
    "pathlib",
    "pysyncobj",
    "random",
    "select",
    "shutil",
    "signal",
    "socket",
    "subprocess",
    "tempfile",
    "threading",
    "time",
    "concurrent",
}

# The only modules under common/, metadata/ and services/ allowed to do I/O: drivers and adapters.
IO_MODULE_NAMES = {
    "authorization.py",  # the ACL interceptor: the principal from a call's TLS session
    "sasl_interceptor.py",  # the SASL gate: a call's ticket, abort UNAUTHENTICATED
    "sasl_servicer.py",  # SaslService: the exchange's stream, its delay and deadline
    "jwks_source.py",  # fetches the OAUTHBEARER JWKS (file, HTTP) on a thread, clock, lock
    "segment.py",  # one segment's files
    "service_channels.py",  # a service's grpc.aio channels to its peers
    "segment_loading.py",  # opens a segment's files: index-file checks, recovery, the cut
    "checkpoint_file.py",  # atomic checkpoint writes
    "log.py",  # composes segments, checkpoints and the pure policies
    "local_log.py",  # a log's segments: creates, rolls, truncates and deletes their files
    "loading.py",  # lists a log directory, reads its checkpoints, recovers its segments
    "producer_snapshots.py",  # producer-state snapshot files, replay from segments
    "producer_log_state.py",  # the producer state beside a log: its snapshots, rebuilds
    "transaction_log_state.py",  # a log's .txnindex files beside the pure transaction index
    "log_durability.py",  # a log's fsyncs, checkpoint files and clean-shutdown marker
    "log_truncation.py",  # truncates a log's tail, deletes its front: files, fsyncs, checkpoints
    "log_compaction.py",  # plans compaction passes and swaps their files in
    "corrupt_mark.py",  # a log's fsynced corrupt-batch file, kept until the repair
    "zstd_contexts.py",  # no I/O, but per-thread zstd contexts (threading.local)
    "producer_transactions.py",  # a log's producer snapshots and .txnindex files, fed together
    # services/runtime: what every service process shares
    "server.py",  # the gRPC server, health, reflection, tracing interceptor
    "listeners.py",  # the public and internal gRPC servers of a service
    "health_file.py",  # touches a file while the service's own listener answers SERVING
    "service_process.py",  # a service's start: config, logs, secret, tracing, metrics, run
    "data_dir_lock.py",  # flock on a data directory's .lock file
    "event_loops.py",  # makes the event loop (uvloop or asyncio) a process runs on
    "allocator.py",  # mallopt through ctypes: large buffers stay in the heap
    "grpc_experiments.py",  # sets GRPC_EXPERIMENTS in os.environ before grpc is imported
    "wrapping_interceptor.py",  # a grpc.aio server interceptor's handler cache
    "logs.py",  # JSON log lines on stderr
    "shutdown.py",  # signals -> asyncio.Event
    "telemetry.py",  # OTel exporter from OTEL_* variables
    "span_file.py",  # spans as JSON lines appended to a file, and their reader
    "transport.py",  # binds listeners and dials peers, TLS or not
    "certificate_watch.py",  # stats and re-reads the TLS files, gRPC's certificate fetcher
    "tls.py",  # reads the PEM files the ssl.* settings name
    "metrics.py",  # OTel meter provider, the Prometheus scrape endpoint, the RPC interceptor
    "secret.py",  # reads and writes the cluster secret file
    "member_auth.py",  # membership proofs on gRPC calls: metadata, clock, nonces, aborts
    "coordinator_lookup.py",  # FindCoordinator's gRPC adapter, served by every service
    "faults.py",  # test-only fault injection, read from the environment
    "txn_added_check.py",  # KIP-890: AddPartitionsToTxn(verify_only) at the coordinator
    "request_stream.py",  # one long-lived stream to a server, answers by correlation id
    "stream_answers.py",  # a served request stream's answers, wait tasks and failure
    "config_loading.py",  # reads the --config file, splits the command line (argparse)
    "supervisor.py",  # runs background loops again after an error: waits, event-loop sleeps
    # services/controller
    "quorum.py",  # pysyncobj: the Raft port, journal and snapshot files
    "raft_transport.py",  # pysyncobj's TCP transport with the Raft port's bounds
    "driver.py",  # asyncio side of the quorum: commits, leadership, waits
    "metadata_fetch.py",  # a controller's FetchMetadata answers: snapshots built on a thread
    "servicer.py",  # gRPC adapters (controller, broker and coordinator)
    "lookup_servicer.py",  # the controller's check of coordinators' proofs (clock, aborts)
    "quota_servicer.py",  # the controller's client quota RPCs (gRPC aborts), a servicer mixin
    "acl_servicer.py",  # the controller's ACL RPCs (gRPC aborts), a servicer mixin
    "quorum_servicer.py",  # the controller's DescribeQuorum (clock), a servicer mixin
    "scram_bootstrap_file.py",  # reads the SCRAM bootstrap file (mode, text), writes it once active
    "main.py",  # process composition (controller, broker and coordinator)
    "__main__.py",
    # services/broker
    "controller_channel.py",  # gRPC to the controllers
    "metadata_follower.py",  # registration, heartbeats
    "metadata_log.py",  # the metadata long-poll
    "partition_host.py",  # opens, creates and deletes partition directories
    "partition_directory.py",  # a partition directory's topic_id file: reads, wipes, writes
    "hosted_partition.py",  # the asyncio event that wakes a partition's waiters
    "fetch.py",  # long-poll waits on appends
    "answer_gate.py",  # fetches waiting (asyncio futures, timers) for the answer budget's room
    "answer_write_deadline.py",  # ends a fetch whose answer gRPC has not written in time
    "broker.py",  # the broker's composition
    "clean_shutdown.py",  # the broker's clean-shutdown file (KIP-966): read, delete, write
    "maintenance.py",  # retention and flush loop
    "log_cleaner.py",  # compaction passes, their reading and writing on a worker thread
    "cleaner.py",  # a pass reads segments through its own descriptors, writes .cleaned files
    "replica_fetcher.py",  # followers fetch from leaders over gRPC
    "fetch_link.py",  # a fetcher's long-lived fetch stream to one server (grpc.aio)
    "replica_stream.py",  # ReplicaFetchStream: followers' fetches on a long-lived gRPC stream
    "fetch_stream.py",  # FetchStream: consumers' fetches on a long-lived gRPC stream
    "quota_throttle.py",  # client quotas at the adapters: call metadata, clock, delayed answers
    "isr_manager.py",  # AlterPartition proposals to the controller
    "scrubber.py",  # re-reads closed segments at a bounded rate, ReportCorruptReplica
    "produce_wait.py",  # acks=all waits for the high watermark
    "delete_records.py",  # DeleteRecords: moves log starts, waits for the low watermark
    "txn_markers.py",  # WriteTxnMarkers: appends markers, refuses with gRPC statuses
    "txn_markers_stream.py",  # WriteTxnMarkersStream: the coordinators' markers on a stream
    "txn_verification.py",  # KIP-890: AddPartitionsToTxn(verify_only) at the coordinator
    "produce_stream.py",  # ProduceStream: the stream's reader, answers and replication waits
    "request_checks.py",  # no I/O, but its refusals are gRPC status codes for the adapters
    "producer_ids.py",  # AllocateProducerIds calls and waits, InitProducerId
    "metadata_servicer.py",  # ControllerService on a broker: reads, forwarded admin writes
    # services/coordinator
    "coordinator.py",  # the coordinator's composition
    "coordinator_membership.py",  # registration and heartbeats with the controllers
    "offsets_log.py",  # produce, fetch and list offsets at the brokers over gRPC
    "internal_produce_stream.py",  # the coordinator's writes over one ProduceStream per broker
    "internal_markers_stream.py",  # and its transaction markers over one stream per broker
    "coordinator_partition.py",  # one owned partition's load, writer and keepalive
    "partition_tasks.py",  # runs a coordinator partition's asyncio tasks together
    "offsets_partition.py",  # the groups' partition: timers over coordinator_partition
    "transaction_partition.py",  # a transactions partition: steps, markers, timeouts
    "transaction_servicer.py",  # TransactionCoordinatorService's gRPC adapter
    "transaction_stream.py",  # its TransactionStream handler and the requests' status checks
    "coordinator_metrics.py",  # the gauges' refresh task, ListOffsets for consumer lag
}


def _modules(folder: str) -> list[Path]:
    return sorted(p for p in (REPO / folder).rglob("*.py") if "node_modules" not in p.parts)


def _imported_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _violations(folder: str, forbidden_prefixes: tuple[str, ...]) -> list[str]:
    found = []
    for path in _modules(folder):
        for name in _imported_names(path):
            if name.startswith(forbidden_prefixes):
                found.append(f"{path.relative_to(REPO)} imports {name}")
    return found


@pytest.mark.parametrize("folder", ["common", "metadata"])
def test_shared_packages_import_no_service_or_client(folder: str) -> None:
    assert _violations(folder, ("samsa.services", "samsa.client", "samsa.cli")) == []


def test_services_do_not_import_clients() -> None:
    assert _violations("services", ("samsa.client", "samsa.cli")) == []


def test_sdk_does_not_import_services() -> None:
    assert _violations("clients/python/samsa_client", ("samsa.services",)) == []
    assert _violations("clients/spark/samsa_spark", ("samsa.services",)) == []


def test_pure_cores_do_no_io() -> None:
    found = []
    for folder in ("common", "metadata", "services"):
        for path in _modules(folder):
            if path.name in IO_MODULE_NAMES:
                continue
            for name in _imported_names(path):
                if name.split(".")[0] in FORBIDDEN_IN_CORES:
                    found.append(f"{path.relative_to(REPO)} imports {name}")
    assert found == [], "pure cores must not do I/O (or add the module to IO_MODULE_NAMES)"


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The rule above must be able to fail: an `import os` in a module is found."""
    module = tmp_path / "core.py"
    module.write_text("import os\nfrom time import monotonic\nfrom . import sibling\n")
    assert _imported_names(module) == {"os", "time"}


def test_every_package_folder_is_mapped() -> None:
    """A folder that holds code but is missing from the mapping would escape the rules above."""
    pyproject = (REPO / "pyproject.toml").read_text()
    for folder, package in PACKAGE_FOLDERS.items():
        assert f'"{package}" = "{folder}"' in pyproject, f"{folder} is not mapped to {package}"

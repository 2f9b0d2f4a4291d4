"""Goal: `writeStream.format("samsa")` (the exactly-once sink) writes every input record exactly
once, as read_committed readers see it, through failed tasks and a driver killed before and
during its commit; and a query keeps one transactional id and one group per task, however many
micro-batches it runs (clients/spark/samsa_spark/exactly_once.py has the reasoning).

Method: a real local cluster (1 controller, 1 broker, 1 coordinator; stopped by PID also on
failure), the query's first two runs in their own processes (eo_pipeline.py, killed with their
process group on the way out) with the sink's fault points set, the last in the shared local
Spark session (conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import TRANSACTION_SETTINGS, local_cluster, read_to_end

from samsa.client import Admin, NewTopic, Producer

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("spark-eo-cluster")
    with local_cluster(data_dir, 1, 1, TRANSACTION_SETTINGS, coordinators=1) as cluster:
        yield cluster.spec.bootstrap_servers


@contextlib.contextmanager
def pipeline(
    bootstrap: str, source: str, target: str, checkpoint: Path, **faults: str
) -> Iterator[subprocess.Popen[bytes]]:
    """eo_pipeline.py in its own process (its own driver, JVM and workers), started now so that
    its Spark session comes up while the test does other things; its query starts at
    `run_to_exit`. Killed with its process group on the way out if it is still running."""
    script = Path(__file__).with_name("eo_pipeline.py")
    env = os.environ | {"PYSPARK_PYTHON": sys.executable} | faults
    command = [sys.executable, str(script), bootstrap, source, target, str(checkpoint)]
    process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def run_to_exit(process: subprocess.Popen[bytes]) -> int:
    """Start the pipeline's query; its exit code (within 240 s, else it is killed on the way
    out of `pipeline`)."""
    assert process.stdin is not None
    process.stdin.write(b"go\n")
    process.stdin.close()
    return process.wait(timeout=240)


def test_the_exactly_once_sink_survives_failed_tasks_and_a_dying_driver(  # type: ignore[no-untyped-def]
    spark, bootstrap: str, tmp_path: Path
) -> None:
    """A streaming copy of 120 records in micro-batches of 40, through three runs of one query:
    (1) every task's first attempt fails after writing (Spark retries it) and the driver dies
    between batch 1's writes and its commit; (2) restarted from the checkpoint, the driver dies
    after committing part of batch 1; (3) restarted again (in this test's own Spark session:
    no fault is left to inject, and a session costs seconds to start), it finishes. Read
    read_committed, the output holds every input record exactly once; the log also holds the
    aborted attempts. The processes of runs 1 and 2 start their Spark sessions at the outset;
    each query starts only once the run before it is dead."""
    from eo_pipeline import copy_query

    source, target = "eo-in", "eo-out"
    checkpoint = tmp_path / "checkpoint"
    with (
        pipeline(
            bootstrap,
            source,
            target,
            checkpoint,
            SAMSA_SPARK_FAIL_TASK_AFTER_PREPARE="1",
            SAMSA_SPARK_EXIT_DRIVER_BEFORE_COMMIT="1",
        ) as first,
        pipeline(
            bootstrap, source, target, checkpoint, SAMSA_SPARK_EXIT_DRIVER_MID_COMMIT="1"
        ) as second,
    ):
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic(source, 2, 1), NewTopic(target, 2, 1)])
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for i in range(120):
                producer.send(source, b"eo-%d" % i, key=b"%d" % i, partition=i % 2)
        assert run_to_exit(first) == -signal.SIGKILL, "the driver died before committing batch 1"
        assert run_to_exit(second) == -signal.SIGKILL, (
            "the driver died with part of batch 1 committed"
        )
    query = copy_query(spark, bootstrap, source, target, str(checkpoint))
    try:
        assert query.awaitTermination(240), "the restarted query finished"
        assert query.exception() is None
    finally:
        query.stop()
    # One transactional id and group per task, whatever the number of batches (four here: the
    # first reads nothing, one is written four times); each group's offset is the batch after
    # the last its task committed.
    names = [f"spark-{query.id}-{task}" for task in range(2)]
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        used = [
            t.transactional_id for t in admin.list_transactions() if query.id in t.transactional_id
        ]
        assert sorted(used) == names
        for name in names:
            committed = admin.list_consumer_group_offsets(name, require_stable=True)
            assert {tp: o.offset for tp, o in committed.items()} == {(target, 0): 4}
    outputs = [(target, 0), (target, 1)]
    committed = sorted(v for _, _, v in read_to_end(bootstrap, outputs, "read_committed"))
    assert committed == sorted(b"eo-%d" % i for i in range(120)), "every record exactly once"
    stored = read_to_end(bootstrap, outputs, "read_uncommitted")
    assert len(stored) > 120, "the failed attempts' records are in the log, aborted"

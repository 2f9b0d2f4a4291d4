"""A streaming copy pipeline as its own process, for the exactly-once sink's failure test.

Usage: eo_pipeline.py BOOTSTRAP INPUT OUTPUT CHECKPOINT

readStream from INPUT (at most 40 records a micro-batch, Trigger.AvailableNow) → writeStream to
OUTPUT with the exactly-once sink, checkpointed at CHECKPOINT. The fault points of
samsa.spark.exactly_once are set by the caller in the environment (inherited by the JVM and the
Python workers). The process starts its Spark session at once but its query only when the line
`go` arrives on stdin (anything else, or EOF, exits 1 without starting): the test brings up the
next run's session, which takes seconds, while the run before it is still going, and starts
the query only once that run is dead. Exits 0 when everything available was copied; the driver
fault points kill this process's group with SIGKILL.
`copy_query` starts the same query on a given session (the test finishes a restarted run in its
own session). Not a test module: it has no side effect when imported.
"""

from __future__ import annotations

import os
import sys

# The JVM of a test's Spark session runs seconds, not hours: with its JIT stopped at C1 it spends
# no CPU on C2 compilations that would never pay off (CI has two cores). Spark passes the setting
# to the driver JVM it launches; in local mode the executors run in that JVM.
SESSION_CONFIG = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def copy_query(spark, bootstrap: str, source: str, target: str, checkpoint: str):  # type: ignore[no-untyped-def]
    """The pipeline's streaming query, started on `spark`."""
    return (
        spark.readStream.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .select("key", "value", "partition")
        .writeStream.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def main(bootstrap: str, source: str, target: str, checkpoint: str) -> int:
    from samsa.spark import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SAMSA_SPARK_DRIVER_PGID"] = str(os.getpgrp())  # for the fault points' kill
    # up to 3 attempts per task
    spark = local_session("samsa-exactly-once", "local[2,3]", **SESSION_CONFIG)
    try:
        if sys.stdin.readline() != "go\n":
            return 1  # the test gave up on this run before its turn
        copy_query(spark, bootstrap, source, target, checkpoint).awaitTermination(240)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

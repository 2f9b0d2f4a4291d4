"""Samsa for Spark, on PySpark's Python Data Source API (PySpark >= 4.1):

    from samsa.spark import register
    register(spark)
    df = (spark.read.format("samsa")
          .option("samsa.bootstrap.servers", "127.0.0.1:9093")
          .option("subscribe", "events")
          .load())

Options and schema follow Spark's Kafka connector (options.py, source.py). PySpark is imported
only when the source is used, so the pure modules (options, ranges) import without it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SamsaDataSource", "local_session", "register"]


def register(spark: Any) -> None:
    """Make `format("samsa")` available in this Spark session."""
    from samsa.spark.source import SamsaDataSource

    spark.dataSource.register(SamsaDataSource)


def local_session(app: str, master: str = "local[2]", **config: str) -> Any:
    """A local Spark session with `format("samsa")` registered: workers on this interpreter
    (PYSPARK_PYTHON, unless set), no UI or progress bars, UTC, few shuffle partitions, quiet
    logs; `config` adds Spark settings (dots as in Spark's names)."""
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
    )
    for key, value in config.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def __getattr__(name: str) -> Any:
    if name == "SamsaDataSource":
        from samsa.spark.source import SamsaDataSource

        return SamsaDataSource
    raise AttributeError(name)

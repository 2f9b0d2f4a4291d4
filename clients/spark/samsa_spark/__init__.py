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

__all__ = ["SamsaDataSource", "register"]


def register(spark: Any) -> None:
    """Make `format("samsa")` available in this Spark session."""
    from samsa.spark.source import SamsaDataSource

    spark.dataSource.register(SamsaDataSource)


def __getattr__(name: str) -> Any:
    if name == "SamsaDataSource":
        from samsa.spark.source import SamsaDataSource

        return SamsaDataSource
    raise AttributeError(name)

"""One local Spark session (local[2]) for the Spark tests: it takes ~6 s to start, so every test
shares it. It takes eo_pipeline.py's SESSION_CONFIG, as the pipeline processes' sessions do.
Workers run this interpreter (PYSPARK_PYTHON), which has samsa installed; the session is stopped
at the end, also on failure."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark extra is not installed")
# The integration tests' cluster helpers (local_cluster, settings) serve these tests too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from eo_pipeline import SESSION_CONFIG

    from samsa.spark import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = local_session("samsa-tests", **SESSION_CONFIG)
    try:
        yield session
    finally:
        session.stop()

"""The Docker engine the compose tests share per module: the running one, or one started here
and stopped by its PID at the end (compose_helpers.docker_engine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from compose_helpers import docker_engine


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The running engine, or one started here and stopped (by its PID) at the end."""
    with docker_engine(tmp_path_factory.mktemp("dockerd")):
        yield

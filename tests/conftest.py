"""Shared test settings, and the services' logs in the report of a failed test (cluster_logs.py).

Hypothesis runs derandomized under CI (CI=true) so that a red run is reproducible from the same
commit; locally it explores new examples each run. SAMSA_HYPOTHESIS_EXAMPLES overrides the count.
"""

import os

import cluster_logs
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=int(os.environ.get("SAMSA_HYPOTHESIS_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    max_examples=int(os.environ.get("SAMSA_HYPOTHESIS_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` (long fault-injection loops) run only with SAMSA_SLOW=1; each such loop
    has a bounded sibling that always runs."""
    if os.environ.get("SAMSA_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow loop: set SAMSA_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _track_local_clusters():
    """Remember every local cluster's data directory, for the logs of a failed test."""
    yield from cluster_logs.track_clusters()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    cluster_logs.begin_test()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed test's report carries what its clusters' services logged (cluster_logs.py)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        text = cluster_logs.report()
        if text:
            report.sections.append(("services' logs (cluster_logs.py)", text))

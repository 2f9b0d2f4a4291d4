"""Shared test settings.

Hypothesis runs derandomized under CI (CI=true) so that a red run is reproducible from the same
commit; locally it explores new examples each run. SAMSA_HYPOTHESIS_EXAMPLES overrides the count.
"""

import os

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

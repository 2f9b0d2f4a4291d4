"""Goal: `samsa up` does not hand SAMSA_METRICS_LISTEN to every service it starts. The variable
names one process's port (deploy/docker-compose.yml sets it per container); inherited by the
eight local services, all but the first failed to bind it and stopped ("cannot serve metrics"),
so a shell that exported it got a cluster that never came up.

Method: the launcher's pure `child_environment` over a made-up environment.
"""

from __future__ import annotations

from samsa.cli import launcher


def test_the_metrics_address_is_not_handed_to_every_local_service() -> None:
    environ = {"SAMSA_METRICS_LISTEN": "0.0.0.0:9100", "SAMSA_LOG_LEVEL": "debug", "PATH": "/x"}
    assert launcher.child_environment(environ) == {"SAMSA_LOG_LEVEL": "debug", "PATH": "/x"}

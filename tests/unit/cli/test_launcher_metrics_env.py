"""Goal: `samsa up` does not hand SAMSA_METRICS_LISTEN nor OTEL_SERVICE_NAME to every service it
starts. Each names one process: a metrics port (deploy/docker-compose.yml sets it per container),
which the eight local services inheriting it all but the first failed to bind, and stopped
("cannot serve metrics"), so a shell that exported it got a cluster that never came up; a
service name, which made every service's spans and metrics look like one process's.

Method: the launcher's pure `child_environment` over a made-up environment.
"""

from __future__ import annotations

from samsa.cli import launcher


def test_the_metrics_address_is_not_handed_to_every_local_service() -> None:
    environ = {"SAMSA_METRICS_LISTEN": "0.0.0.0:9100", "SAMSA_LOG_LEVEL": "debug", "PATH": "/x"}
    assert launcher.child_environment(environ) == {"SAMSA_LOG_LEVEL": "debug", "PATH": "/x"}


def test_the_service_name_is_not_handed_to_every_local_service() -> None:
    """OTEL_SERVICE_NAME names one process (an application's, exported in the shell that then
    runs `samsa up`): inherited, every controller, broker and coordinator took it, and their
    spans (samsa trace) and metrics could no longer be told apart; each keeps its own name."""
    environ = {"OTEL_SERVICE_NAME": "checkout", "OTEL_TRACES_EXPORTER": "file", "PATH": "/x"}
    assert launcher.child_environment(environ) == {"OTEL_TRACES_EXPORTER": "file", "PATH": "/x"}

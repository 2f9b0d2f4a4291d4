"""Goal: deploy/prometheus.yml scrapes every Samsa service of deploy/docker-compose.yml, on the
port the compose file tells the services to serve metrics on, and that port stays inside the
compose network.

Method: both files are read as text (no YAML library is a dependency): the compose services are
the two-space-indented keys under `services:` whose command runs `samsa.services.*`; the metrics
port is the one SAMSA_METRICS_LISTEN names; the scrape targets are the quoted HOST:PORT strings
of prometheus.yml. Whether the services really serve there is the compose test's and the compose
bench's business (a real engine).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
COMPOSE = (REPO / "deploy/docker-compose.yml").read_text()
PROMETHEUS = (REPO / "deploy/prometheus.yml").read_text()


def samsa_services(compose: str) -> set[str]:
    """The services whose command runs a Samsa service."""
    services = compose.split("\nservices:\n", 1)[1]
    services = re.split(r"\n(?=\S)", services, maxsplit=1)[0]  # up to the next top-level key
    found = set()
    for block in re.split(r"\n(?=  [a-z0-9-]+:\n)", "\n" + services):
        name = re.match(r"\s*([a-z0-9-]+):", block)
        if name and re.search(r'command: \["python", "-m", "samsa\.services\.', block):
            found.add(name.group(1))
    return found


def metrics_port(compose: str) -> int:
    (port,) = re.findall(r"^\s+SAMSA_METRICS_LISTEN: 0\.0\.0\.0:(\d+)$", compose, re.MULTILINE)
    return int(port)


def scrape_targets(prometheus: str) -> set[tuple[str, int]]:
    return {(host, int(port)) for host, port in re.findall(r'"([a-z0-9-]+):(\d+)"', prometheus)}


def test_every_samsa_service_is_scraped_on_the_metrics_port() -> None:
    services = samsa_services(COMPOSE)
    assert len(services) == 8  # 3 controllers, 3 brokers, 2 coordinators
    port = metrics_port(COMPOSE)
    assert scrape_targets(PROMETHEUS) == {(service, port) for service in services}


def test_the_metrics_port_is_not_published_on_the_host() -> None:
    port = metrics_port(COMPOSE)
    published = re.findall(r'"(\d+):(\d+)"', COMPOSE)
    assert all(int(container) != port for _, container in published)


def test_the_setting_is_shared_by_every_service() -> None:
    """It sits in the environment every service's environment merges (x-environment)."""
    shared = COMPOSE.split("x-environment: &environment\n", 1)[1].split("\n\n", 1)[0]
    assert "SAMSA_METRICS_LISTEN:" in shared
    for role in ("controller", "member"):
        block = COMPOSE.split(f"x-{role}-environment: &{role}-environment\n", 1)[1]
        assert block.startswith("  <<: *environment\n")
    merges = COMPOSE.count("<<: *controller-environment") + COMPOSE.count("<<: *member-environment")
    assert merges == len(samsa_services(COMPOSE))

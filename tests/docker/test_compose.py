"""deploy/docker-compose.yml on a real Docker engine: build, up, produce and consume from a
container on the compose network and from the host, kill a broker and the active controller,
check that nothing acknowledged (acks=all) is lost, down -v.

Method. The image is built from the local base deploy/build-local-base.sh makes (debootstrap from
this machine's apt mirror, cached by name: registries' images cannot be pulled here) and wheels
built on the host for its Python (3.11, bookworm's). The compose project name is unique per run
and everything it creates (containers, network, volumes, the image) is removed in `finally`, as
is the dockerd this test started, by its PID. The host client reaches the brokers through their
published ports; the names they advertise (broker-1, ...) resolve to 127.0.0.1 on the host the
way the README tells a user to set it up, here through an /etc/hosts bind-mounted in a private
mount namespace (unshare), so the machine's own file is left alone.

Skipped, with the reason, where there is no Docker engine to run (no dockerd, docker-compose or
debootstrap, or not root); CI installs them (.ci/setup --dev).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from compose_helpers import (
    DEPLOY,
    HOST_BOOTSTRAP,
    NETWORK_BOOTSTRAP,
    REPO,
    TOOLS,
    Compose,
    build_base_and_wheels,
    build_image,
    on_host,
    run,
    write_hosts,
)

CLIENT = Path(__file__).with_name("compose_client.py")

missing = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"no Docker engine here: {missing} not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="dockerd and unshare --mount need root"),
    pytest.mark.timeout(900),
]


def network_client(compose: Compose, *args: str) -> dict:
    """compose_client.py in a container on the project's network."""
    out = run(
        "docker", "run", "--rm", "--network", compose.network,
        "-v", f"{CLIENT}:/tmp/compose_client.py:ro", compose.image,
        "python", "/tmp/compose_client.py", *args,
    )  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def host_client(hosts: Path, *args: str) -> dict:
    """compose_client.py on the host, with the advertised names resolving to 127.0.0.1."""
    out = on_host(hosts, str(REPO / ".venv/bin/python"), str(CLIENT), *args)
    return json.loads(out.strip().splitlines()[-1])


def test_compose_cluster_survives_a_broker_and_the_active_controller(engine: None) -> None:
    started = time.monotonic()
    build_base_and_wheels()
    run_id = uuid.uuid4().hex[:8]
    image = f"samsa:compose-test-{run_id}"
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        secret = scratch / "cluster.secret"
        run("bash", str(DEPLOY / "generate-secret.sh"), str(secret))
        hosts = write_hosts(scratch / "hosts")
        compose = Compose(f"samsatest{run_id}", image, secret)
        try:
            build_image(image)
            print(f"cold setup (base, wheels, image): {time.monotonic() - started:.1f} s")
            check_cluster(compose, hosts)
        finally:
            compose.down()
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


def check_cluster(compose: Compose, hosts: Path) -> None:
    up_started = time.monotonic()
    compose("up", "-d")
    compose.wait_healthy(up_started)
    print(f"up -> every container healthy: {time.monotonic() - up_started:.1f} s")
    cluster = network_client(compose, NETWORK_BOOTSTRAP, "wait-healthy", "3", "2")
    print(f"up -> cluster healthy (brokers unfenced): {time.monotonic() - up_started:.1f} s")

    # From a container on the compose network, then from the host through the published ports.
    network_client(compose, NETWORK_BOOTSTRAP, "create", "orders", "3")
    acked = network_client(compose, NETWORK_BOOTSTRAP, "produce", "orders", "network", "300")[
        "acked"
    ]
    assert len(acked) == 300
    from_host = host_client(hosts, HOST_BOOTSTRAP, "produce", "orders", "host", "200")["acked"]
    assert len(from_host) == 200
    acked += from_host
    assert sorted(host_client(hosts, HOST_BOOTSTRAP, "consume", "orders")["values"]) == sorted(
        acked
    )

    # A broker and the active controller crash (SIGKILL); the rest keep serving.
    active = cluster["active"]
    compose("kill", f"controller-{active}", "broker-2")
    survivors = "broker-1:19092,broker-3:19094"
    after = network_client(compose, survivors, "produce", "orders", "after-kill", "300")
    assert after["acked"], f"nothing acknowledged after the kill: {after['failed']}"
    acked += after["acked"]
    values = network_client(compose, survivors, "consume", "orders")["values"]
    lost = sorted(set(acked) - set(values))
    assert not lost, f"{len(lost)} acknowledged records lost: {lost[:10]}"
    assert len(values) == len(set(values)), "a record was read twice"

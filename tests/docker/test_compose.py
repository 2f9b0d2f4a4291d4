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
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CLIENT = Path(__file__).with_name("compose_client.py")
BASE_IMAGE = "samsa-base:bookworm"  # kept between runs: a second run skips debootstrap
BASE_PYTHON = "3.11"  # bookworm's python3, for the wheels
TOOLS = ("docker", "dockerd", "docker-compose", "debootstrap", "unshare")
HOST_NAMES = "broker-1 broker-2 broker-3 coordinator-1 coordinator-2"
HOST_BOOTSTRAP = "localhost:19092,localhost:19093,localhost:19094"
NETWORK_BOOTSTRAP = "broker-1:19092,broker-2:19093,broker-3:19094"
SERVICES = 8  # 3 controllers, 3 brokers, 2 coordinators
HEALTHY_TIMEOUT_S = 120.0
DOCKERD_READY_S = 30.0

missing = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = [
    pytest.mark.skipif(bool(missing), reason=f"no Docker engine here: {missing} not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="dockerd and unshare --mount need root"),
    pytest.mark.timeout(900),
]


def run(*command: str, timeout_s: float = 300, **kwargs: object) -> str:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, check=False, **kwargs
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-3000:]}"
        )
    return result.stdout


def engine_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


@pytest.fixture(scope="module")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The running engine, or one started here and stopped (by its PID) at the end."""
    if engine_answers():
        yield
        return
    log = open(tmp_path_factory.mktemp("dockerd") / "dockerd.log", "wb")  # noqa: SIM115
    dockerd = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + DOCKERD_READY_S
        while not engine_answers():
            assert dockerd.poll() is None, f"dockerd exited {dockerd.returncode}; see {log.name}"
            assert time.monotonic() < deadline, f"dockerd not ready in {DOCKERD_READY_S} s"
            time.sleep(0.5)
        yield
    finally:
        dockerd.terminate()
        try:
            dockerd.wait(timeout=30)
        except subprocess.TimeoutExpired:
            dockerd.kill()
            dockerd.wait()
        log.close()


class Compose:
    """docker-compose on deploy/docker-compose.yml, as one uniquely named project."""

    def __init__(self, project: str, image: str, secret: Path) -> None:
        self.project = project
        self.environment = os.environ | {"SAMSA_IMAGE": image, "SAMSA_CLUSTER_SECRET": str(secret)}
        self.image = image

    def __call__(self, *args: str, timeout_s: float = 300) -> str:
        command = ["docker-compose", "-p", self.project, "-f", str(DEPLOY / "docker-compose.yml")]
        return run(*command, *args, timeout_s=timeout_s, env=self.environment)

    def health(self) -> dict[str, str]:
        """Health status by service name, of the running containers."""
        statuses = {}
        for container in self("ps", "-q").split():
            inspected = json.loads(run("docker", "inspect", container))[0]
            service = inspected["Config"]["Labels"]["com.docker.compose.service"]
            state = inspected["State"]
            statuses[service] = state.get("Health", {}).get("Status", state["Status"])
        return statuses

    def client(self, *args: str) -> dict:
        """compose_client.py in a container on the project's network."""
        out = run(
            "docker", "run", "--rm", "--network", f"{self.project}_default",
            "-v", f"{CLIENT}:/tmp/compose_client.py:ro", self.image,
            "python", "/tmp/compose_client.py", *args,
        )  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])


def host_client(hosts: Path, *args: str) -> dict:
    """compose_client.py on the host, with the advertised names resolving to 127.0.0.1."""
    out = run(
        "unshare", "--mount", "--", "sh", "-c",
        'mount --bind "$0" /etc/hosts && shift && exec "$@"', str(hosts), "--",
        str(REPO / ".venv/bin/python"), str(CLIENT), *args,
    )  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def test_compose_cluster_survives_a_broker_and_the_active_controller(docker_engine: None) -> None:
    started = time.monotonic()
    run("bash", str(DEPLOY / "build-local-base.sh"), BASE_IMAGE, timeout_s=600)
    run("bash", str(DEPLOY / "build-wheels.sh"), BASE_PYTHON, timeout_s=600)
    run_id = uuid.uuid4().hex[:8]
    image = f"samsa:compose-test-{run_id}"
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        secret = scratch / "cluster.secret"
        run("bash", str(DEPLOY / "generate-secret.sh"), str(secret))
        hosts = scratch / "hosts"
        hosts.write_text(Path("/etc/hosts").read_text() + f"\n127.0.0.1 {HOST_NAMES}\n")
        compose = Compose(f"samsatest{run_id}", image, secret)
        try:
            run("docker", "build", "-q", "-t", image, "--build-arg", f"BASE={BASE_IMAGE}",
                str(DEPLOY), timeout_s=600)  # fmt: skip
            print(f"cold setup (base, wheels, image): {time.monotonic() - started:.1f} s")
            check_cluster(compose, hosts)
        finally:
            subprocess.run(
                ["docker-compose", "-p", compose.project, "-f", str(DEPLOY / "docker-compose.yml"),
                 "down", "-v", "--remove-orphans", "-t", "5"],
                env=compose.environment, capture_output=True, timeout=120, check=False,
            )  # fmt: skip
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


def check_cluster(compose: Compose, hosts: Path) -> None:
    up_started = time.monotonic()
    compose("up", "-d")
    deadline = up_started + HEALTHY_TIMEOUT_S
    while (health := compose.health()) != {name: "healthy" for name in health} or len(
        health
    ) < SERVICES:
        assert time.monotonic() < deadline, f"not healthy in {HEALTHY_TIMEOUT_S} s: {health}"
        time.sleep(0.5)
    print(f"up -> every container healthy: {time.monotonic() - up_started:.1f} s")
    cluster = compose.client(NETWORK_BOOTSTRAP, "wait-healthy", "3", "2")
    print(f"up -> cluster healthy (brokers unfenced): {time.monotonic() - up_started:.1f} s")

    # From a container on the compose network, then from the host through the published ports.
    compose.client(NETWORK_BOOTSTRAP, "create", "orders", "3")
    acked = compose.client(NETWORK_BOOTSTRAP, "produce", "orders", "network", "300")["acked"]
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
    after = compose.client(survivors, "produce", "orders", "after-kill", "300")
    assert after["acked"], f"nothing acknowledged after the kill: {after['failed']}"
    acked += after["acked"]
    values = compose.client(survivors, "consume", "orders")["values"]
    lost = sorted(set(acked) - set(values))
    assert not lost, f"{len(lost)} acknowledged records lost: {lost[:10]}"
    assert len(values) == len(set(values)), "a record was read twice"

"""What the compose test (test_compose.py) and the compose bench (bench/compose_bench.py) share:
running commands, a Docker engine started when none answers (and stopped by its PID), the image
built on the local base, deploy/docker-compose.yml as one uniquely named project, and commands
run on the host with the advertised names (broker-1, ...) resolving to 127.0.0.1.

Why the local base and the host names: registries' images cannot be pulled here, so the image is
built from the base deploy/build-local-base.sh makes (debootstrap from this machine's apt mirror,
cached by name) and wheels built on the host for its Python (3.11, bookworm's). The host reaches
the brokers through their published ports; the names they advertise resolve to 127.0.0.1 the way
the README tells a user to set it up, here through an /etc/hosts bind-mounted in a private mount
namespace (unshare), so that the machine's own file is left alone.

Plain functions and no pytest: the bench imports this file by path (tests/ is not a package).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
TLS_OVERLAY = DEPLOY / "docker-compose.tls.yml"
SASL_OVERLAY = DEPLOY / "docker-compose.sasl.yml"  # on top of TLS_OVERLAY
BASE_IMAGE = "samsa-base:bookworm"  # kept between runs: a second run skips debootstrap
BASE_PYTHON = "3.11"  # bookworm's python3, for the wheels
TOOLS = ("docker", "dockerd", "docker-compose", "debootstrap", "unshare")
HOST_NAMES = "broker-1 broker-2 broker-3 coordinator-1 coordinator-2"
HOST_BOOTSTRAP = "localhost:19092,localhost:19093,localhost:19094"
NETWORK_BOOTSTRAP = "broker-1:19092,broker-2:19093,broker-3:19094"
SERVICES = 8  # 3 controllers, 3 brokers, 2 coordinators
HEALTHY_TIMEOUT_S = 120.0
DOCKERD_READY_S = 30.0
DOCKERD_STOP_S = 30.0
BUILD_TIMEOUT_S = 600.0
DOWN_TIMEOUT_S = 120.0


def run(*command: str, timeout_s: float = 300, **kwargs: object) -> str:
    """Run `command`; its stdout, or an AssertionError carrying the ends of both outputs."""
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


@contextlib.contextmanager
def docker_engine(log_dir: Path, *, new_session: bool = False) -> Iterator[None]:
    """The running engine, or one started here (its log in `log_dir`) and stopped by its PID
    on the way out. `new_session` keeps a Ctrl-C in the terminal from reaching it, so that
    the caller can still clean up through it."""
    if engine_answers():
        yield
        return
    log = open(log_dir / "dockerd.log", "wb")  # noqa: SIM115
    dockerd = subprocess.Popen(
        ["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=new_session
    )
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
            dockerd.wait(timeout=DOCKERD_STOP_S)
        except subprocess.TimeoutExpired:
            dockerd.kill()
            dockerd.wait()
        log.close()


def build_base_and_wheels() -> None:
    """The local base image (skipped when it exists) and the wheels for its Python."""
    run("bash", str(DEPLOY / "build-local-base.sh"), BASE_IMAGE, timeout_s=BUILD_TIMEOUT_S)
    run("bash", str(DEPLOY / "build-wheels.sh"), BASE_PYTHON, timeout_s=BUILD_TIMEOUT_S)


@contextlib.contextmanager
def overlay_run(name: str) -> Iterator[tuple[str, str, Path]]:
    """One overlay test's run: its id, its image (the local base, the wheels and the image
    built, the time that took printed) and a scratch directory for its secret and files; the
    image is removed at the end (its compose project is the caller's to take down first)."""
    started = time.monotonic()
    build_base_and_wheels()
    run_id = uuid.uuid4().hex[:8]
    image = f"samsa:compose-{name}-test-{run_id}"
    try:
        with tempfile.TemporaryDirectory() as scratch:
            build_image(image)
            print(f"cold setup (base, wheels, image): {time.monotonic() - started:.1f} s")
            yield run_id, image, Path(scratch)
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)
        print(f"whole test: {time.monotonic() - started:.1f} s")


def build_image(image: str) -> None:
    """deploy/Dockerfile on the local base, tagged `image`."""
    run("docker", "build", "-q", "-t", image, "--build-arg", f"BASE={BASE_IMAGE}",
        str(DEPLOY), timeout_s=BUILD_TIMEOUT_S)  # fmt: skip


def write_hosts(path: Path) -> Path:
    """A copy of /etc/hosts where the advertised names resolve to 127.0.0.1."""
    path.write_text(Path("/etc/hosts").read_text() + f"\n127.0.0.1 {HOST_NAMES}\n")
    return path


def on_host(hosts: Path, *command: str, timeout_s: float = 300, **kwargs: object) -> str:
    """`command` on the host, with `hosts` bind-mounted over /etc/hosts in a private mount
    namespace; its stdout."""
    return run(
        "unshare", "--mount", "--", "sh", "-c",
        'mount --bind "$0" /etc/hosts && shift && exec "$@"', str(hosts), "--", *command,
        timeout_s=timeout_s, **kwargs,
    )  # fmt: skip


def container_health(containers: list[str]) -> dict[str, str]:
    """Health status by compose service name of `containers` (ids), in one `docker inspect`."""
    if not containers:
        return {}
    statuses = {}
    for inspected in json.loads(run("docker", "inspect", *containers)):
        service = inspected["Config"]["Labels"]["com.docker.compose.service"]
        state = inspected["State"]
        statuses[service] = state.get("Health", {}).get("Status", state["Status"])
    return statuses


def container_cpu_s(container: str) -> float:
    """CPU seconds `container` (a full id) has used, its health checks' processes included: its
    cgroup's accounting (v1 cpuacct; v2 under the cgroupfs or the systemd driver)."""
    v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{container}/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e9
    for v2 in (
        Path(f"/sys/fs/cgroup/docker/{container}/cpu.stat"),
        Path(f"/sys/fs/cgroup/system.slice/docker-{container}.scope/cpu.stat"),
    ):
        if v2.exists():
            stat = dict(line.split() for line in v2.read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
    raise FileNotFoundError(f"no CPU accounting found for container {container}")


class Compose:
    """docker-compose on deploy/docker-compose.yml (and `overlays`, such as TLS_OVERLAY), as one
    uniquely named project; `environment` adds variables for compose's substitutions."""

    def __init__(
        self,
        project: str,
        image: str,
        secret: Path,
        *,
        overlays: tuple[Path, ...] = (),
        environment: dict[str, str] | None = None,
    ) -> None:
        self.project = project
        self.environment = (
            os.environ
            | {"SAMSA_IMAGE": image, "SAMSA_CLUSTER_SECRET": str(secret)}
            | (environment or {})
        )
        self.image = image
        self.files = [flag for file in (COMPOSE_FILE, *overlays) for flag in ("-f", str(file))]

    @property
    def network(self) -> str:
        return f"{self.project}_default"

    def __call__(self, *args: str, timeout_s: float = 300) -> str:
        command = ["docker-compose", "-p", self.project, *self.files]
        return run(*command, *args, timeout_s=timeout_s, env=self.environment)

    def containers(self) -> list[str]:
        return self("ps", "-q").split()

    def health(self) -> dict[str, str]:
        """Health status by service name, of the running containers."""
        return container_health(self.containers())

    def wait_healthy(self, started: float, timeout_s: float = HEALTHY_TIMEOUT_S) -> None:
        """Until every one of the SERVICES containers passes its health check; `started` is
        the monotonic time the deadline counts from."""
        deadline = started + timeout_s
        containers = self.containers()
        while (health := container_health(containers)) != {
            name: "healthy" for name in health
        } or len(health) < SERVICES:
            assert time.monotonic() < deadline, f"not healthy in {timeout_s} s: {health}"
            time.sleep(0.2)
            if len(containers) < SERVICES:  # `up -d` still creating them
                containers = self.containers()

    def down(self) -> None:
        """Remove the project's containers, network and volumes; never raises (cleanup)."""
        subprocess.run(
            ["docker-compose", "-p", self.project, *self.files,
             "down", "-v", "--remove-orphans", "-t", "5"],
            env=self.environment, capture_output=True, timeout=DOWN_TIMEOUT_S, check=False,
        )  # fmt: skip

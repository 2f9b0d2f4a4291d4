"""Goal: deploy/build-wheels.sh fetches binary wheels for the machine the image is built on:
x86_64 on a PC, aarch64 on an ARM machine (an Apple-silicon Mac, a Graviton host), whose Docker
builds arm64 images. It asked for x86_64 wheels only, so on an ARM machine `docker build` then
failed with no matching grpcio (or protobuf, cryptography, ...) for the image's platform.

Method: the script's `platform_tags` function, cut out of the script with its own text and run
by bash, for each machine name `uname -m` gives; no download.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "build-wheels.sh"


def run_platform_tags(machine: str) -> subprocess.CompletedProcess[str]:
    text = SCRIPT.read_text()
    match = re.search(r"^platform_tags\(\) \{\n.*?^\}\n", text, re.MULTILINE | re.DOTALL)
    assert match, "build-wheels.sh defines platform_tags() { ... }"
    return subprocess.run(
        ["bash", "-c", match.group(0) + 'platform_tags "$1"', "bash", machine],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def platform_tags(machine: str) -> list[str]:
    done = run_platform_tags(machine)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


MACHINES = [("x86_64", "x86_64"), ("amd64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64")]


@pytest.mark.parametrize(("machine", "arch"), MACHINES)
def test_wheels_are_fetched_for_the_machines_architecture(machine: str, arch: str) -> None:
    tags = platform_tags(machine)
    assert "any" in tags
    linux = [tag for tag in tags if tag != "any"]
    assert linux and all(tag.endswith("_" + arch) for tag in linux), tags
    assert f"manylinux2014_{arch}" in linux


def test_an_unknown_machine_is_refused_by_name() -> None:
    done = run_platform_tags("sparc64")
    assert done.returncode != 0 and "sparc64" in done.stderr

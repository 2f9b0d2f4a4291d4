"""Goal: no service runs with its assertions stripped. `python -O` drops every `assert`, among
them the relations between bounds in common/limits.py and the pure cores' invariants, so each
service refuses to start under it with one line saying why and exit code 2 (before it reads any
config, secret or port).

Method: each service's module run in a subprocess with -O and no arguments; and, as the control
that shows the refusal is what stops it, the same without -O stops for another reason (its
missing configuration), not this one.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SERVICES = ["controller", "broker", "coordinator"]


def run(service: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-m", f"samsa.services.{service}"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_refuses_to_run_under_python_dash_o(service: str) -> None:
    result = run(service, "-O")
    assert result.returncode == 2, result.stderr
    assert f"samsa {service}: refusing to run under python -O" in result.stderr


def test_without_dash_o_the_same_start_fails_for_another_reason() -> None:
    result = run("broker")
    assert result.returncode == 2, result.stderr
    assert "refusing to run under python -O" not in result.stderr

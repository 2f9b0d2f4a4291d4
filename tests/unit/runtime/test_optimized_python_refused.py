"""Goal: no service runs with its assertions stripped. `python -O` drops every `assert`, among
them the relations between bounds in common/limits.py and the pure cores' invariants, so each
service refuses to start under it with one line saying why and exit code 2 (before it reads any
config, secret or port). A SAMSA_EVENT_LOOP naming no loop stops it the same way, and so does
a SAMSA_FAULTS it cannot honour (it was a traceback at import), and a SAMSA_LOG_LEVEL naming no
level.

Method: each service's module run in a subprocess with -O and no arguments; and, as the control
that shows the refusal is what stops it, the same without -O stops for another reason (its
missing configuration), not this one.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SERVICES = ["controller", "broker", "coordinator"]


def run(
    service: str, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-m", f"samsa.services.{service}"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
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


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_refuses_an_event_loop_it_cannot_run(service: str) -> None:
    # common/event_loops.py: SAMSA_EVENT_LOOP is uvloop or asyncio; anything else stops the
    # service at start with one line naming the choices (and is not taken for a config key).
    result = run(service, env={**os.environ, "SAMSA_EVENT_LOOP": "trio"})
    assert result.returncode == 2, result.stderr
    assert f"samsa {service}: SAMSA_EVENT_LOOP='trio': use one of uvloop, asyncio" in result.stderr


@pytest.mark.parametrize("faults", ["produce.drop_answr=0.1", "produce.drop_answer=1.5"])
def test_a_service_refuses_a_fault_setting_it_cannot_honour(faults: str) -> None:
    # services/runtime/faults.py: an unknown fault or a probability outside [0, 1] refuses to
    # start the process, as a bad setting does: one line, exit code 2, no traceback.
    result = run("broker", env={**os.environ, "SAMSA_FAULTS": faults})
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("samsa broker: SAMSA_FAULTS: ")


def test_a_service_refuses_a_log_level_it_does_not_know(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # SAMSA_LOG_LEVEL=bogus raised ValueError out of logging's setLevel: a traceback, exit 1.
    result = subprocess.run(
        [
            *(sys.executable, "-m", "samsa.services.broker", "--broker-id", "1"),
            *("--listen", "127.0.0.1:0", "--controllers", "127.0.0.1:1"),
            *("--data-dir", str(tmp_path / "data"), "--secret-file", str(tmp_path / "none")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "SAMSA_LOG_LEVEL": "bogus"},
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "samsa broker: SAMSA_LOG_LEVEL='bogus': use one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
    )

"""Goal: Samsa's processes turn gRPC's EventEngine client and listener off unless something chose
gRPC's setup first (common/grpc_experiments.py): an operator's GRPC_EXPERIMENTS, even an empty
one, wins; an application that imported grpc before the SDK keeps gRPC's defaults; and the
installed grpcio still knows the experiments named (a release that dropped them would log
"Unknown experiment" at every start).

Method: the pure decision on hand-made environments; then fresh interpreters (the only way to
import grpc for the first time) that import the SDK or grpc in different orders, print the
variable, and open a channel with stderr captured.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from samsa.common.grpc_experiments import (
    LEGACY_POLLER,
    VARIABLE,
    VERBOSITY,
    experiments_to_set,
    prefer_legacy_poller,
    quiet_core_logs,
)


def test_set_only_when_nothing_chose() -> None:
    assert experiments_to_set({}, grpc_imported=False) == LEGACY_POLLER
    assert experiments_to_set({VARIABLE: ""}, grpc_imported=False) is None
    assert experiments_to_set({VARIABLE: "-event_engine_dns"}, grpc_imported=False) is None
    assert experiments_to_set({}, grpc_imported=True) is None


def test_in_a_process_that_imported_grpc_it_changes_nothing() -> None:
    assert "grpc" in sys.modules  # the test process has (conftest imports the launcher)
    environ: dict[str, str] = {}
    assert prefer_legacy_poller(environ) == ""
    assert environ == {}
    assert prefer_legacy_poller({VARIABLE: "-event_engine_dns"}) == "-event_engine_dns"


def fresh_python(code: str, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != VARIABLE} | environ
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


OPEN_CHANNEL = (
    "import grpc; grpc.insecure_channel('127.0.0.1:1').close(); "
    "import os; print(repr(os.environ.get('GRPC_EXPERIMENTS')))"
)


@pytest.mark.parametrize(
    ("code", "environ", "expected"),
    [
        ("import samsa.client; " + OPEN_CHANNEL, {}, repr(LEGACY_POLLER)),
        ("import samsa.cli.main; " + OPEN_CHANNEL, {}, repr(LEGACY_POLLER)),
        ("import samsa.client; " + OPEN_CHANNEL, {VARIABLE: ""}, "''"),
        ("import grpc, samsa.client; " + OPEN_CHANNEL, {}, "None"),
    ],
    ids=["sdk-first", "cli-first", "operator-chose", "grpc-first"],
)
def test_a_fresh_process_chooses_as_documented(
    code: str, environ: dict[str, str], expected: str
) -> None:
    done = fresh_python(code, **environ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
    assert "Unknown experiment" not in done.stderr, (
        "this grpcio no longer has the experiments common/grpc_experiments.py turns off: "
        "measure again without them and drop the module"
    )


def test_services_keep_grpcs_core_info_lines_out_unless_the_operator_asks() -> None:
    environ: dict[str, str] = {}
    quiet_core_logs(environ)
    assert environ == {VERBOSITY: "ERROR"}
    chosen = {VERBOSITY: "INFO"}
    quiet_core_logs(chosen)
    assert chosen == {VERBOSITY: "INFO"}


# A TLS listener dialled in plaintext: gRPC's core writes "Handshake failed" at INFO to stderr.
PLAINTEXT_TO_TLS = """
import sys
from samsa.common.grpc_experiments import quiet_core_logs
if sys.argv[1] == "quiet":
    quiet_core_logs()
import tempfile, pathlib, grpc
from concurrent import futures
from samsa.cli.certificates import create_ca, issue
from samsa.common.tls import TlsSettings
d = pathlib.Path(tempfile.mkdtemp())
ca = create_ca(d)
pair = issue(ca, d, "server", ["127.0.0.1"])
settings = TlsSettings.load(ca_location=None, certificate_location=str(pair.certificate),
                            key_location=str(pair.key))
server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
port = server.add_secure_port("127.0.0.1:0", settings.server_credentials())
server.start()
with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
    try:
        grpc.channel_ready_future(channel).result(timeout=2)
    except grpc.FutureTimeoutError:
        pass
server.stop(0)
"""


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "grpc-default"])
def test_a_failed_handshake_writes_no_core_line_once_quieted(quiet: bool) -> None:
    env = {name: value for name, value in os.environ.items() if name != VERBOSITY}
    done = subprocess.run(
        [sys.executable, "-c", PLAINTEXT_TO_TLS, "quiet" if quiet else "loud"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # The default run shows what quieting removes, so that this test fails if gRPC stops
    # writing the line (and the setting becomes pointless) as well as if quieting stops working.
    assert ("Handshake failed" in done.stderr) is not quiet, done.stderr

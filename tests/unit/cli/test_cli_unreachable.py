"""Goal: a cluster that cannot be reached is one line naming the address, the reason in words and
what to check, whatever gRPC said (refused, unknown host, no answer); never gRPC's debug string.

Method: `_unreachable` on fake gRPC errors carrying the details gRPC gives for each case (copied
from real runs); the end-to-end behaviour is in tests/integration/test_cli_commands.py.
"""

from __future__ import annotations

import grpc
import pytest
from fake_rpc_error import FakeRpcError

from samsa.cli.commands import _unreachable


@pytest.mark.parametrize(
    ("code", "details", "reason"),
    [
        (
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to "
            "connect to remote host: Connection refused",
            "connection refused",
        ),
        (
            grpc.StatusCode.UNAVAILABLE,
            "errors resolving nosuchhost.invalid:9: [field:hostname lookup error:address lookup "
            "failed for nosuchhost.invalid:9: Domain name not found]",
            "unknown host",
        ),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", "no answer in time"),
        (grpc.StatusCode.UNAVAILABLE, "Socket closed; more", "Socket closed"),
        (
            grpc.StatusCode.UNIMPLEMENTED,
            "Method not found!",
            "a gRPC service other than Samsa answers there",
        ),
    ],
)
def test_each_cause_is_one_line_with_the_reason_in_words(
    code: grpc.StatusCode, details: str, reason: str
) -> None:
    line = _unreachable("127.0.0.1:1", FakeRpcError(code, details))
    assert line == (
        f"samsa: cannot reach the cluster at 127.0.0.1:1 ({reason}); is `samsa up` running? "
        "check --bootstrap-server or $SAMSA_BOOTSTRAP"
    )
    assert "\n" not in line
    with_tls = _unreachable("127.0.0.1:1", FakeRpcError(code, details), tls=True)
    assert with_tls == f"{line}, and --command-config (the CA, a client certificate it signed)"

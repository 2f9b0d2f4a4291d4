"""`python -m samsa.cli.health HOST:PORT [SERVICE]`: one grpc.health.v1 Check, as an exit code.

What a container health check runs (deploy/docker-compose.yml): exit 0 when the server at
HOST:PORT answers SERVING, 1 otherwise (NOT_SERVING while stopping, no answer, an error), with
one line on stderr saying which. SERVICE is the health service name to ask about; the empty
default is the server as a whole. The timeout is short on purpose: a health check that hangs
counts as failed anyway, and compose runs it again.

`--command-config FILE` (command_config.py): a service serving TLS is asked over TLS, with the
file's CA and, where the service requires one, client certificate; without it, plaintext, which a
TLS listener does not answer (UNAVAILABLE).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from samsa.cli.command_config import CommandConfigError, check_security, read_command_config
from samsa.common.tls import TlsSettings

TIMEOUT_S_DEFAULT = 3.0


def check(
    address: str,
    service: str = "",
    timeout_s: float = TIMEOUT_S_DEFAULT,
    security: TlsSettings | None = None,
) -> str | None:
    """None when `address` answers SERVING for `service`; else why not, in one line. Dialled
    with TLS when `security` is given."""
    if security is None:
        opened = grpc.insecure_channel(address)
    else:
        opened = grpc.secure_channel(address, security.channel_credentials())
    with opened as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as error:
            return f"{address}: {error.code().name}"
    if answer.status != health_pb2.HealthCheckResponse.SERVING:
        return f"{address}: {health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m samsa.cli.health", description="grpc.health.v1 Check, as an exit code"
    )
    parser.add_argument("address", help="HOST:PORT of the service's gRPC listener")
    parser.add_argument("service", nargs="?", default="", help="health service name (default: '')")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S_DEFAULT, help="seconds")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="TLS settings (security.protocol=SSL, ssl.*.location), a properties file",
    )
    args = parser.parse_args(argv)
    security = None
    if args.command_config:
        source = f"--command-config {args.command_config}"
        try:
            settings = read_command_config(Path(args.command_config))
            check_security(settings, source)
        except CommandConfigError as error:
            print(f"unhealthy: {error}", file=sys.stderr)
            return 2
        security = TlsSettings.from_client_config(settings)
    problem = check(args.address, args.service, args.timeout, security)
    if problem is not None:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

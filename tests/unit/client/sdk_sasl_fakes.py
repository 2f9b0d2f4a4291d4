"""A minimal SASL/SCRAM cluster for the SDK's login tests (test_client_sasl_channels.py): one
in-process TLS gRPC server serving SaslService (common.scram.ScramServer over a dict of
credentials, a fixed ticket per exchange), a fake controller and a fake broker, behind a gate
that refuses calls without the ticket as the services do (UNAUTHENTICATED, samsa-error-code 58).
The services' own gate is not used: these tests hold the SDK's side only."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from sdk_tls_fakes import Broker, Certificates, Controller

from samsa.common.errors import ErrorCode
from samsa.common.scram import (
    MECHANISMS,
    ScramCredential,
    ScramError,
    ScramServer,
    credential_for_password,
)
from samsa.common.tls import TlsSettings
from samsa.v1 import broker_pb2_grpc, controller_pb2_grpc, security_pb2, security_pb2_grpc

TICKET = "ticket-for-alice"
LIFETIME_MS = 3_600_000
SASL_SERVICE = "/samsa.v1.SaslService/"
USERS = {"alice": "alice-secret"}


@dataclass
class Ledger:
    """What the server saw: exchanges run, and the ticket each gated call carried."""

    exchanges: int = 0
    failed_exchanges: int = 0
    tickets: list[str | None] = field(default_factory=list)
    valid_tickets: set[str] = field(default_factory=lambda: {TICKET})
    lock: threading.Lock = field(default_factory=threading.Lock)


def credentials(mechanism: str) -> dict[str, ScramCredential]:
    return {
        name: credential_for_password(MECHANISMS[mechanism], password, b"salt-" + name.encode())
        for name, password in USERS.items()
    }


class Sasl(security_pb2_grpc.SaslServiceServicer):
    """One SCRAM exchange per stream over `credentials`; answers TICKET on success."""

    def __init__(self, ledger: Ledger, mechanism: str, forge_final: bool = False) -> None:
        self._ledger = ledger
        self._credentials = credentials(mechanism)
        self._mechanism = mechanism
        self._forge_final = forge_final  # a server that cannot prove the credential

    def SaslAuthenticate(self, requests, context):  # type: ignore[no-untyped-def]
        with self._ledger.lock:
            self._ledger.exchanges += 1
        first = next(requests)
        if first.mechanism != self._mechanism:
            yield security_pb2.SaslAuthenticateResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                error_message=f"{first.mechanism} is not enabled",
                enabled_mechanisms=[self._mechanism],
            )
            return
        server = ScramServer(
            MECHANISMS[self._mechanism], self._credentials.get, "server-nonce", b"decoy-key"
        )
        yield security_pb2.SaslAuthenticateResponse(
            auth_bytes=server.server_first(first.auth_bytes)
        )
        final = next(requests)
        try:
            server_final = server.server_final(final.auth_bytes)
        except ScramError as error:
            with self._ledger.lock:
                self._ledger.failed_exchanges += 1
            yield security_pb2.SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(error)
            )
            return
        if self._forge_final:
            server_final = b"v=" + b"A" * 44
        yield security_pb2.SaslAuthenticateResponse(
            auth_bytes=server_final, session_ticket=TICKET, session_lifetime_ms=LIFETIME_MS
        )


class TicketGate(grpc.ServerInterceptor):
    """Refuses every call but SaslService's without a valid ticket, as the services' gate."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        if details.method.startswith(SASL_SERVICE):
            return continuation(details)
        ticket = dict(details.invocation_metadata).get("samsa-sasl-ticket")
        with self._ledger.lock:
            self._ledger.tickets.append(ticket)
            valid = ticket in self._ledger.valid_tickets
        if valid:
            return continuation(details)

        def refuse(request: Any, context: grpc.ServicerContext) -> Any:
            context.set_trailing_metadata((("samsa-error-code", "58"),))
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no valid SASL session ticket")

        return grpc.unary_unary_rpc_method_handler(refuse)


@dataclass
class ServedSasl:
    endpoint: str
    ledger: Ledger
    controller: Controller
    broker: Broker


@contextmanager
def serving_sasl(
    certificates: Certificates, mechanism: str = "SCRAM-SHA-256", forge_final: bool = False
) -> Iterator[ServedSasl]:
    """SaslService, a controller and a broker on one TLS port of 127.0.0.1, gated by ticket;
    stopped on the way out, even when the test fails."""
    settings = TlsSettings.load(
        ca_location=str(certificates.ca),
        certificate_location=str(certificates.server[0]),
        key_location=str(certificates.server[1]),
    )
    ledger = Ledger()
    served = ServedSasl("", ledger, Controller(), Broker())
    server = grpc.server(ThreadPoolExecutor(max_workers=8), interceptors=[TicketGate(ledger)])
    security_pb2_grpc.add_SaslServiceServicer_to_server(
        Sasl(ledger, mechanism, forge_final), server
    )
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(served.controller, server)
    broker_pb2_grpc.add_BrokerServiceServicer_to_server(served.broker, server)
    port = server.add_secure_port("127.0.0.1:0", settings.server_credentials())
    served.endpoint = f"127.0.0.1:{port}"
    server.start()
    try:
        yield served
    finally:
        server.stop(None).wait(5)

"""A service's gRPC listeners: the public one, and the internal one when `internal.listeners`
is set (Kafka's separate inter-broker and control-plane listeners, KIP-291, KIP-402).

Why. `max.connections` (and the guard's bound on requests in progress) protect a process from
strangers, but on one listener they count the cluster's own connections too: a stranger holding
max.connections idle connections to a partition leader shuts its followers out (the ISR shrinks,
acks=all stalls), and to the controller shuts out the brokers' heartbeats (they are fenced). The
internal listener is a second grpc.aio server serving the same servicers, with its own
connection bound (`limits.grpc_connections_max`, not max.connections) and its own RpcGuard, so
the public quota never counts internal traffic. Members advertise it when they register, and
members dial it: replica fetches, the coordinators' produce and marker streams to brokers, the
brokers' transaction checks with coordinators; calls to the controllers go wherever
`controller.quorum.bootstrap.servers` points (the controllers' internal listeners, when they
have them), and NOT_CONTROLLER redirects follow that choice (controller_channel.py).

It is not an authentication boundary: member-only calls prove membership with the cluster
secret on either listener (membership.py), and a stranger reaching the internal port is served
as on the public one. Keeping strangers off it is the network's job (bind it on a private
interface, or firewall it), as with Kafka's inter-broker listener.

`handlers` is what the services register their servicers on: it forwards each registration to
every listener, so that both serve the same API.

With `authorization` (authorizer.class.name set: authorization.py), every listener decides each
call against the ACLs, inside its guard; members' calls (membership proof) pass on either.

Every listener serves SaslService (sasl_servicer.py), SASL on or off (off, it says so). With
`sasl` enabled (sasl.enabled.mechanisms set), every listener's SASL gate (sasl_interceptor.py)
refuses calls without a session ticket or a membership proof, inside the guard and before the
authorizer, which then sees the ticket's `User:<name>`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc

from samsa.common import limits
from samsa.services.runtime.authorization import Authorization, AuthorizingInterceptor
from samsa.services.runtime.sasl_gate import SASL_OFF, Sasl
from samsa.services.runtime.sasl_interceptor import SaslGateInterceptor
from samsa.services.runtime.sasl_servicer import SERVICE_NAME as SASL_SERVICE_NAME
from samsa.services.runtime.sasl_servicer import SaslServicer
from samsa.services.runtime.server import GrpcServer
from samsa.v1 import security_pb2_grpc


class _EveryServer:
    """Takes a servicer's registration (the generated `add_*_to_server` calls these two) and
    makes it on every listener."""

    def __init__(self, servers: Sequence[GrpcServer]) -> None:
        self._servers = list(servers)

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        for server in self._servers:
            server.server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: Any) -> None:
        for server in self._servers:
            server.server.add_registered_method_handlers(service, handlers)


class Listeners:
    """The public GrpcServer on `listen` (max.connections, the health file) and, with
    `internal_listen`, an internal one serving the same services."""

    def __init__(
        self,
        listen: str,
        service_names: Sequence[str],
        *,
        tracing: bool,
        health_file: str | None = None,
        connections_max: int = limits.grpc_connections_max,
        internal_listen: str | None = None,
        authorization: Authorization | None = None,
        sasl: Sasl | None = None,
    ) -> None:
        if sasl is None:  # off: the servicer only says so, and never issues a ticket
            sasl = SASL_OFF.bind(b"", dict)
        service_names = [*service_names, SASL_SERVICE_NAME]

        def inner() -> list[grpc.aio.ServerInterceptor]:
            chain: list[grpc.aio.ServerInterceptor] = []
            if sasl.enabled:  # first: the authorizer must see the ticket's principal
                chain.append(SaslGateInterceptor(sasl))
            if authorization is not None:
                chain.append(AuthorizingInterceptor(authorization))
            return chain

        self.public = GrpcServer(
            listen,
            service_names,
            tracing=tracing,
            health_file=health_file,
            connections_max=connections_max,
            inner_interceptors=inner(),
        )
        self.internal: GrpcServer | None = None
        if internal_listen is not None:
            self.internal = GrpcServer(
                internal_listen,
                service_names,
                tracing=tracing,
                listen_key="internal.listeners",
                inner_interceptors=inner(),
            )
        servers = [self.public] if self.internal is None else [self.public, self.internal]
        self.servers = servers
        self.handlers: Any = _EveryServer(servers)
        self.sasl_servicer = SaslServicer(sasl)
        security_pb2_grpc.add_SaslServiceServicer_to_server(self.sasl_servicer, self.handlers)

    @property
    def port(self) -> int:
        """The public listener's bound port (0 before start)."""
        return self.public.port

    @property
    def internal_port(self) -> int | None:
        """The internal listener's bound port; None without one."""
        return None if self.internal is None else self.internal.port

    async def start(self) -> None:
        """Start every listener; ServerStartError naming the address one could not bind (or,
        with OAUTHBEARER, the JWKS URL that could not be read: fetched first)."""
        await self.sasl_servicer.start()
        await self.public.start()
        if self.internal is None:
            return
        try:
            await self.internal.start()
        except BaseException:
            await self.public.stop(0)
            raise

    async def stop(self, grace_s: float) -> None:
        await asyncio.gather(*(server.stop(grace_s) for server in self.servers))

"""Goal: with authorization on, every listener of a process (the public one and the internal
one) decides calls, inside its RPC guard; with it off there is no authorizer at all (zero cost).

Method: Listeners built (not started, on an event loop of their own: a grpc.aio server needs a
current loop) with and without an Authorization; their interceptor lists read back.
"""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.metadata.acls import Acls, AuthorizerSettings
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.runtime.authorization import Authorization, AuthorizingInterceptor
from samsa.services.runtime.listeners import Listeners
from samsa.services.runtime.server import RpcGuard


def interceptors(**kwargs: Any) -> list[list[type]]:
    """The interceptor types of each listener of Listeners(**kwargs), built on a fresh loop."""

    async def build() -> list[list[type]]:
        listeners = Listeners(**kwargs)
        return [[type(i) for i in server.interceptors] for server in listeners.servers]

    return asyncio.run(build())


def authorization() -> Authorization:
    return Authorization(
        AuthorizerSettings(), PrincipalRules.parse("DEFAULT"), Acls.empty, b"k" * 32
    )


def test_every_listener_authorizes_inside_its_guard() -> None:
    chains = interceptors(
        listen="127.0.0.1:0",
        service_names=["samsa.v1.BrokerService"],
        tracing=False,
        internal_listen="127.0.0.1:0",
        authorization=authorization(),
    )
    assert len(chains) == 2
    for chain in chains:
        assert chain[-2:] == [RpcGuard, AuthorizingInterceptor]


def test_off_means_no_authorizer() -> None:
    chains = interceptors(
        listen="127.0.0.1:0",
        service_names=["samsa.v1.BrokerService"],
        tracing=False,
        internal_listen="127.0.0.1:0",
    )
    for chain in chains:
        assert AuthorizingInterceptor not in chain
        assert chain[-1] is RpcGuard

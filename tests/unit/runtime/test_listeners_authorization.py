"""Goal: with authorization on, every listener of a process (the public one and the internal
one) decides calls, inside its RPC guard; with it off there is no authorizer at all (zero cost).

Method: Listeners built (not started) with and without an Authorization; their interceptor lists
read back.
"""

from __future__ import annotations

from samsa.metadata.acls import Acls, AuthorizerSettings
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.runtime.authorization import Authorization, AuthorizingInterceptor
from samsa.services.runtime.listeners import Listeners
from samsa.services.runtime.server import RpcGuard


def interceptors(listeners: Listeners) -> list[list[type]]:
    return [[type(i) for i in server.interceptors] for server in listeners.servers]


def authorization() -> Authorization:
    return Authorization(
        AuthorizerSettings(), PrincipalRules.parse("DEFAULT"), Acls.empty, b"k" * 32
    )


def test_every_listener_authorizes_inside_its_guard() -> None:
    listeners = Listeners(
        "127.0.0.1:0",
        ["samsa.v1.BrokerService"],
        tracing=False,
        internal_listen="127.0.0.1:0",
        authorization=authorization(),
    )
    chains = interceptors(listeners)
    assert len(chains) == 2
    for chain in chains:
        assert chain[-2:] == [RpcGuard, AuthorizingInterceptor]


def test_off_means_no_authorizer() -> None:
    listeners = Listeners(
        "127.0.0.1:0", ["samsa.v1.BrokerService"], tracing=False, internal_listen="127.0.0.1:0"
    )
    for chain in interceptors(listeners):
        assert AuthorizingInterceptor not in chain
        assert chain[-1] is RpcGuard

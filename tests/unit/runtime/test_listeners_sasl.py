"""Goal: with SASL on, every listener of a process (public and internal) has the SASL gate
inside its RPC guard and before the authorizer (which must see the ticket's principal); with it
off there is no gate at all; and every listener serves SaslService either way (off, it says so).

Method: Listeners built on an event loop of their own (not started); their interceptor lists
and service names read back.
"""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.common import scram
from samsa.services.runtime.authorization import AuthorizingInterceptor
from samsa.services.runtime.listeners import Listeners
from samsa.services.runtime.sasl_gate import SASL_OFF, SaslConfig
from samsa.services.runtime.sasl_interceptor import SaslGateInterceptor
from samsa.services.runtime.server import RpcGuard
from tests.unit.runtime.test_listeners_authorization import authorization

SASL_ON = SaslConfig((scram.SCRAM_SHA_256,), 60_000).bind(b"k" * 32, dict)


def built(**kwargs: Any) -> list[tuple[list[type], list[str]]]:
    async def build() -> list[tuple[list[type], list[str]]]:
        listeners = Listeners(
            listen="127.0.0.1:0",
            service_names=["samsa.v1.BrokerService"],
            tracing=False,
            internal_listen="127.0.0.1:0",
            **kwargs,
        )
        return [
            ([type(i) for i in server.interceptors], server.service_names)
            for server in listeners.servers
        ]

    return asyncio.run(build())


def test_the_gate_runs_inside_the_guard_and_before_the_authorizer() -> None:
    for chain, _ in built(sasl=SASL_ON, authorization=authorization()):
        assert chain[-3:] == [RpcGuard, SaslGateInterceptor, AuthorizingInterceptor]
    for chain, _ in built(sasl=SASL_ON):
        assert chain[-2:] == [RpcGuard, SaslGateInterceptor]


def test_sasl_off_means_no_gate_but_the_service_still_answers() -> None:
    for sasl in (None, SASL_OFF.bind(b"k" * 32, dict)):
        for chain, names in built(sasl=sasl):
            assert SaslGateInterceptor not in chain
            assert "samsa.v1.SaslService" in names

"""Goal: a service that enables OAUTHBEARER reads RFC 7628's client message, validates its token
against the JWKS it loaded at start (again when a token names a new key), and issues a ticket
for User:<sub> that never outlives the token; refuses a bad token with the generic
SASL_AUTHENTICATION_FAILED; its gate admits OAUTHBEARER tickets without looking for a SCRAM
credential, and a process without OAUTHBEARER refuses them; the sasl.oauthbearer.* keys are read
and checked (a JWKS URL is required with OAUTHBEARER, and refused without it).

Method: the pure parts directly (message, lifetime, tickets, gate); the servicer driven through
SaslAuthenticate with a fake call context, the JWKS a file:// URL the test writes, keys and
tokens made in the test (jwt_minting.py); service configs from properties text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jwt_minting import SigningKey, jwks, token

from samsa.common.errors import ErrorCode
from samsa.common.jwt_validation import Expectations
from samsa.services.runtime import sasl_exchange, sasl_tickets
from samsa.services.runtime.config import ConfigError
from samsa.services.runtime.jwks_source import JwksStartError
from samsa.services.runtime.sasl_gate import SASL_OFF, SaslConfig, Session, decide, still_current
from samsa.services.runtime.sasl_gate import expired as sasl_expired
from samsa.services.runtime.sasl_oauthbearer import (
    BearerMessageError,
    OAuthBearerSettings,
    client_message,
    parse_message,
    session_lifetime_ms,
)
from samsa.services.runtime.sasl_servicer import SaslServicer
from samsa.v1 import security_pb2
from tests.unit.runtime.test_config import broker

KEY = SigningKey("k1")
KEY_MATERIAL = b"m" * 32
HOUR_MS = 3_600_000


def test_the_client_message_is_parsed_as_rfc_7628_says() -> None:
    assert parse_message(client_message("a.b.c")).token == "a.b.c"
    with_pairs = b"n,a=al=2Cice,\x01host=x\x01auth=bearer  t.o.k \x01port=1\x01\x01"
    parsed = parse_message(with_pairs)
    assert (parsed.token, parsed.authzid) == ("t.o.k", "al,ice")


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"n,,\x01auth=Bearer t\x01",  # no final \x01
        b"p=tls-unique,,\x01auth=Bearer t\x01\x01",  # channel binding
        b"n,,\x01auth=Basic dXNlcg==\x01\x01",
        b"n,,\x01auth=Bearer \x01\x01",
        b"n,,\x01host=x\x01\x01",
        b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
        b"n,a=x=y,\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer \xff\x01\x01",
        b"n,,\x01auth=Bearer " + b"t" * 20_000 + b"\x01\x01",
    ],
)
def test_a_malformed_client_message_is_refused(message: bytes) -> None:
    with pytest.raises(BearerMessageError):
        parse_message(message)


def test_a_session_never_outlives_its_token() -> None:
    now_ms = 1_000_000
    assert session_lifetime_ms(HOUR_MS, now_ms / 1000 + 60, now_ms) == 60_000
    assert session_lifetime_ms(HOUR_MS, now_ms / 1000 + 7200, now_ms) == HOUR_MS
    assert session_lifetime_ms(HOUR_MS, now_ms / 1000 - 1, now_ms) <= 0


def test_an_oauthbearer_ticket_passes_the_gate_only_where_oauthbearer_is_enabled() -> None:
    ticket = sasl_tickets.issue(
        KEY_MATERIAL, "svc-1", sasl_tickets.OAUTHBEARER, b"f" * 8, 1000, 60_000
    )
    claims = sasl_tickets.verify(KEY_MATERIAL, ticket, 2000)
    assert claims.mechanism is sasl_tickets.OAUTHBEARER
    admitted = decide(ticket, lambda: False, KEY_MATERIAL, 2000, {}, bearer=True)
    assert admitted.principal == "User:svc-1" and admitted.refusal is None
    # No SCRAM credential to look for; a stream still ends at the ticket's expiry.
    assert admitted.session == Session(("svc-1", 3), None, 61_000)
    assert still_current(admitted.session, {}) and not sasl_expired(admitted.session, 60_999)
    assert sasl_expired(admitted.session, 61_000)
    refused = decide(ticket, lambda: False, KEY_MATERIAL, 2000, {}, bearer=False)
    assert refused.refusal is not None and "OAUTHBEARER is not enabled" in refused.refusal
    expired = decide(ticket, lambda: False, KEY_MATERIAL, 61_000, {}, bearer=True)
    assert expired.refusal is not None and "expired" in expired.refusal


class FakeContext:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def abort(self, *args: Any) -> None:
        raise AssertionError(f"aborted: {args}")


def servicer(jwks_file: Path, audiences: tuple[str, ...] = ()) -> SaslServicer:
    settings = OAuthBearerSettings(jwks_file.as_uri(), expect=Expectations(audiences=audiences))
    sasl = SaslConfig((), HOUR_MS, settings).bind(KEY_MATERIAL, dict)
    return SaslServicer(sasl)


def authenticate(
    served: SaslServicer, message: bytes, mechanism: str = "OAUTHBEARER", start: bool = True
) -> list[security_pb2.SaslAuthenticateResponse]:
    """The answers to one exchange (after the servicer's start, which loads the JWKS)."""

    async def requests() -> AsyncIterator[security_pb2.SaslAuthenticateRequest]:
        yield security_pb2.SaslAuthenticateRequest(mechanism=mechanism, auth_bytes=message)

    async def run() -> list[security_pb2.SaslAuthenticateResponse]:
        if start:
            await served.start()
        stream = served.SaslAuthenticate(requests(), FakeContext())  # type: ignore[arg-type]
        return [answer async for answer in stream]

    return asyncio.run(run())


def claims(**changes: Any) -> dict[str, Any]:
    return {"sub": "svc-1", "aud": "samsa", "exp": time.time() + 120, **changes}


def test_a_valid_token_earns_a_ticket_capped_at_its_expiry(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_bytes(jwks(KEY))
    served = servicer(tmp_path / "jwks.json", ("samsa",))
    [answer] = authenticate(served, client_message(token(KEY, claims())))
    assert answer.error_code == ErrorCode.NONE, answer.error_message
    assert 100_000 < answer.session_lifetime_ms <= 120_000  # the token's 2 minutes, not an hour
    ticket = sasl_tickets.verify(served.sasl.ticket_key, answer.session_ticket, _now_ms())
    assert (ticket.user, ticket.mechanism) == ("svc-1", sasl_tickets.OAUTHBEARER)
    [long_lived] = authenticate(served, client_message(token(KEY, claims(exp=time.time() + 7200))))
    assert long_lived.session_lifetime_ms == HOUR_MS


@pytest.mark.parametrize(
    "message",
    [
        client_message(token(KEY, claims(aud="elsewhere"))),
        client_message(token(KEY, claims(exp=time.time() - 3600))),
        client_message(token(SigningKey("k1"), claims())),  # signed by another key
        client_message("not-a-jwt"),
        b"n,a=mallory,\x01auth=Bearer " + token(KEY, claims()).encode() + b"\x01\x01",
        b"garbage",
    ],
    ids=["audience", "expired", "signature", "malformed", "authzid", "message"],
)
def test_a_bad_login_answers_the_generic_failure(tmp_path: Path, message: bytes) -> None:
    (tmp_path / "jwks.json").write_bytes(jwks(KEY))
    [answer] = authenticate(servicer(tmp_path / "jwks.json", ("samsa",)), message)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == sasl_exchange.BEARER_FAILED
    assert not answer.session_ticket


def test_a_new_key_id_fetches_the_jwks_again_at_most_every_10_seconds(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_bytes(jwks(KEY))
    served = servicer(path)
    asyncio.run(served.start())
    rotated = SigningKey("k2")
    path.write_bytes(jwks(KEY, rotated))
    message = client_message(token(rotated, claims()))
    [answer] = authenticate(served, message, start=False)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # fetched < 10 s ago
    assert served.jwks is not None
    served.jwks._tried_ms -= 10_000  # the rate limit's last try is 10 s past
    [answer] = authenticate(served, message, start=False)
    assert answer.error_code == ErrorCode.NONE, answer.error_message


def test_oauthbearer_is_named_among_the_enabled_mechanisms(tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_bytes(jwks(KEY))
    [answer] = authenticate(servicer(tmp_path / "jwks.json"), b"", mechanism="PLAIN")
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert list(answer.enabled_mechanisms) == ["OAUTHBEARER"]


def test_a_jwks_that_cannot_be_loaded_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(JwksStartError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url=file://"):
        asyncio.run(servicer(tmp_path / "missing.json").start())
    (tmp_path / "empty.json").write_text('{"keys": []}')
    with pytest.raises(JwksStartError, match="no usable key"):
        asyncio.run(servicer(tmp_path / "empty.json").start())
    asyncio.run(SaslServicer(SASL_OFF.bind(b"", dict)).start())  # nothing to load


TLS = (
    "security.protocol=SSL\nssl.certificate.location=/tls/cert.pem\nssl.key.location=/tls/key.pem\n"
)


def test_the_oauthbearer_keys_are_read_and_checked() -> None:
    config = broker(
        file=TLS + "sasl.enabled.mechanisms=SCRAM-SHA-256,oauthbearer\n"
        "sasl.oauthbearer.jwks.endpoint.url=https://idp.example/jwks\n"
        "sasl.oauthbearer.expected.audience=samsa, kafka\n"
        "sasl.oauthbearer.expected.issuer=https://idp.example\n"
        "sasl.oauthbearer.sub.claim.name=client_id\n"
        "sasl.oauthbearer.clock.skew.seconds=5\n"
    )
    sasl = SaslConfig.of(config)
    assert config.sasl_enabled_mechanisms == ("SCRAM-SHA-256", "OAUTHBEARER")
    assert sasl.oauth == OAuthBearerSettings(
        "https://idp.example/jwks",
        3_600_000,
        Expectations("https://idp.example", ("samsa", "kafka"), "client_id", 5),
    )
    assert SaslConfig.of(broker(file=TLS)).oauth is None
    with pytest.raises(ConfigError, match=r"set sasl\.oauthbearer\.jwks\.endpoint\.url"):
        broker(file=TLS + "sasl.enabled.mechanisms=OAUTHBEARER\n")
    with pytest.raises(ConfigError, match="has no OAUTHBEARER"):
        broker(file=TLS + "sasl.oauthbearer.jwks.endpoint.url=file:///jwks.json\n")
    with pytest.raises(ConfigError, match="file://, http:// or https://"):
        broker(
            file=TLS + "sasl.enabled.mechanisms=OAUTHBEARER\n"
            "sasl.oauthbearer.jwks.endpoint.url=ftp://idp/jwks\n"
        )


def _now_ms() -> int:
    return int(time.time() * 1000)

"""Goal: an SDK client configured with sasl.mechanism=OAUTHBEARER and librdkafka's OIDC keys holds
an OAUTHBEARER login; the keys are checked together (sasl.username/password and extensions
refused, method=oidc, a token URL, a client id and secret required); the client_credentials
request is built as RFC 6749 says and the answer read (an OAuth error is a refusal, an
unreachable or failing endpoint is not); the CLI's --command-config takes the keys.

Method: the pure parts (common/tls.py, oidc_token.py) directly; fetch_token against an
http.server on loopback in a thread of this process, answering what each test tells it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar
from urllib.parse import parse_qs

import pytest
from oidc_provider import serving

from samsa.cli.command_config import parse_command_config
from samsa.client.client_tls import client_security
from samsa.client.oidc_token import TokenRefused, access_token, token_request
from samsa.client.sasl_exchange import fetch_token, oauthbearer_exchange
from samsa.client.sasl_login import LoginRefused
from samsa.common.tls import OidcSettings, SaslSettings, TlsConfigError

OIDC = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "oauthbearer",
    "sasl.oauthbearer.method": "OIDC",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
    "sasl.oauthbearer.client.id": "svc-1",
    "sasl.oauthbearer.client.secret": "s3cret:&=",
}


def test_the_oidc_keys_make_an_oauthbearer_login_without_a_user_name() -> None:
    settings = SaslSettings.from_client_config({**OIDC, "sasl.oauthbearer.scope": "kafka"})
    assert settings is not None and settings.mechanism == "OAUTHBEARER"
    assert settings.oidc == OidcSettings("https://idp.example/token", "svc-1", "s3cret:&=", "kafka")
    assert "s3cret" not in repr(settings)
    assert settings.who == "OAuth client 'svc-1'"
    security = client_security(OIDC)
    assert security is not None and security.login is not None
    assert security.login._exchange.func is oauthbearer_exchange  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"sasl.username": "alice"}, r"sasl\.username does not apply"),
        ({"sasl.password": "pw"}, r"sasl\.password does not apply"),
        ({"sasl.oauthbearer.extensions": "a=b"}, "not supported"),
        ({"sasl.oauthbearer.method": None}, "needs sasl.oauthbearer.method=oidc"),
        ({"sasl.oauthbearer.method": "default"}, "unsecured tokens"),
        ({"sasl.oauthbearer.token.endpoint.url": None}, "needs sasl.oauthbearer.token"),
        ({"sasl.oauthbearer.client.id": None}, "needs sasl.oauthbearer.client.id"),
        ({"sasl.oauthbearer.client.secret": None}, "needs sasl.oauthbearer.client.secret"),
        ({"sasl.oauthbearer.token.endpoint.url": "file:///t"}, "http:// or https://"),
        ({"sasl.mechanism": "SCRAM-SHA-256"}, "OAUTHBEARER only"),
        ({"security.protocol": "SSL"}, "set security.protocol=SASL_SSL"),
    ],
)
def test_keys_that_cannot_work_together_are_refused(
    changes: dict[str, str | None], reason: str
) -> None:
    config = {k: v for k, v in {**OIDC, **changes}.items() if v is not None}
    with pytest.raises(TlsConfigError, match=reason):
        SaslSettings.from_client_config(config)  # type: ignore[arg-type]


def test_the_token_request_is_a_client_credentials_grant_with_basic_auth() -> None:
    oidc = OidcSettings("https://idp.example/token", "svc 1", "s3cret:&=", "kafka read")
    request = token_request(oidc)
    assert request.url == "https://idp.example/token"
    assert parse_qs(request.body.decode()) == {
        "grant_type": ["client_credentials"],
        "scope": ["kafka read"],
    }
    scheme, encoded = request.headers["Authorization"].split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded) == b"svc+1:s3cret%3A%26%3D"  # form-encoded first (RFC 6749)
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert b"scope" not in token_request(OidcSettings("https://i/t", "a", "b")).body


def test_the_answer_gives_the_access_token_or_says_why_not() -> None:
    assert access_token(b'{"access_token": "t.o.k", "token_type": "bearer"}') == "t.o.k"
    for body, reason in [
        (b'{"error": "invalid_client", "error_description": "bad secret"}', "bad secret"),
        (b'{"token_type": "Bearer"}', "no access_token"),
        (b'{"access_token": "t", "token_type": "mac"}', "not Bearer"),
        (b"<html>", "not JSON"),
        (b"[]", "not a JSON object"),
        (b" " * (64 * 1024 + 1), "more than"),
    ]:
        with pytest.raises(TokenRefused, match=reason):
            access_token(body)


class TokenEndpoint(BaseHTTPRequestHandler):
    answer: ClassVar[tuple[int, dict[str, Any]]] = (200, {})
    seen: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        TokenEndpoint.seen.append((self.headers["Authorization"], body))
        status, payload = TokenEndpoint.answer
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    with serving(TokenEndpoint) as url:
        yield url


def test_fetch_token_posts_the_grant_and_reads_the_token(endpoint: str) -> None:
    TokenEndpoint.seen.clear()
    TokenEndpoint.answer = (200, {"access_token": "t.o.k", "token_type": "Bearer"})
    assert fetch_token(OidcSettings(endpoint, "svc-1", "pw")) == "t.o.k"
    [(authorization, body)] = TokenEndpoint.seen
    assert authorization == "Basic " + base64.b64encode(b"svc-1:pw").decode()
    assert body == b"grant_type=client_credentials"


def test_an_oauth_error_is_a_refusal_and_a_failing_endpoint_is_not(endpoint: str) -> None:
    TokenEndpoint.answer = (401, {"error": "invalid_client"})
    with pytest.raises(LoginRefused, match=r"HTTP 401.*invalid_client"):
        fetch_token(OidcSettings(endpoint, "svc-1", "wrong"))
    TokenEndpoint.answer = (503, {})
    with pytest.raises(OSError, match="HTTP 503"):
        fetch_token(OidcSettings(endpoint, "svc-1", "pw"))
    with pytest.raises(OSError):
        fetch_token(OidcSettings("http://127.0.0.1:1/token", "svc-1", "pw"))


def test_the_cli_command_config_takes_the_oidc_keys() -> None:
    text = "\n".join(f"{key}={value}" for key, value in OIDC.items())
    assert parse_command_config(text, "client.properties") == OIDC

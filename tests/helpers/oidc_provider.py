"""Test-only: an OIDC identity provider's token endpoint on loopback (http.server in a thread
of the test process), for the OAUTHBEARER integration tests: the client_credentials grant with
HTTP Basic, answered with an RS256 JWT for the client id (jwt_minting.py), whose JWKS a test
writes where the services read it; `token_url_fixture` makes the fixture giving its URL."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs

import pytest
from jwt_minting import SigningKey, token

ISSUER = "https://idp.test"
AUDIENCE = "samsa"
SECRETS = {"svc-orders": "orders-secret"}  # the clients the provider knows


class IdentityProvider(BaseHTTPRequestHandler):
    """The token endpoint: client_credentials with Basic auth; a token for the client id."""

    key: ClassVar[SigningKey] = SigningKey("test-key-1")
    audience: ClassVar[str] = AUDIENCE  # what the next tokens are issued for
    lifetime_s: ClassVar[int] = 600  # how long the next tokens live (their exp - iat)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        user, _, secret = (
            base64.b64decode(self.headers.get("Authorization", "Basic ").removeprefix("Basic "))
            .decode()
            .partition(":")
        )
        if parse_qs(body.decode()).get("grant_type") != ["client_credentials"]:
            return self._answer(400, {"error": "unsupported_grant_type"})
        if SECRETS.get(user) != secret:
            return self._answer(401, {"error": "invalid_client"})
        now = int(time.time())
        lifetime = self.lifetime_s
        claims = {
            "sub": user,
            "iss": ISSUER,
            "aud": self.audience,
            "iat": now,
            "exp": now + lifetime,
        }
        issued = {"access_token": token(self.key, claims), "token_type": "Bearer"}
        return self._answer(200, {**issued, "expires_in": lifetime})

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on a loopback port by a thread of this process; yields its /token URL."""
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def token_url_fixture() -> Callable[..., Iterator[str]]:
    """A module-scoped fixture running the endpoint; a test module binds it as
    `token_url = token_url_fixture()` and takes `token_url`, the endpoint's URL."""

    @pytest.fixture(scope="module")
    def token_url() -> Iterator[str]:
        with serving(IdentityProvider) as url:
            yield url

    return token_url

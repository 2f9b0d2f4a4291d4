"""An OAUTHBEARER client's token request, pure: the OAuth 2.0 client_credentials grant (RFC 6749
section 4.4) as librdkafka's `sasl.oauthbearer.method=oidc` makes it, and the reading of the
answer. The HTTP POST itself is sasl_exchange.py's (urllib).

Theory of operation. The client authenticates to the token endpoint with HTTP Basic over its
client id and secret, each form-urlencoded first (RFC 6749 2.3.1), and posts the form
`grant_type=client_credentials[&scope=...]`. The answer is JSON (RFC 6749 5.1) whose
`access_token` is the JWT the client sends to the cluster; `token_type`, when given, must be
Bearer. An error answer (5.2: `error`, `error_description`) is a refusal: a wrong secret does
not get better by retrying. The answer is read up to TOKEN_RESPONSE_BYTES_MAX. A token is asked
for at each login (the client logs in again at 80% of its session, and the cluster never makes a
session outlive its token), so no token is cached here.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from urllib.parse import quote_plus, urlencode

from samsa.common import limits
from samsa.common.tls import OidcSettings

TOKEN_RESPONSE_BYTES_MAX = limits.oauthbearer_token_response_bytes_max


class TokenRefused(Exception):
    """The token endpoint refused the request, or answered something that is not a token."""


@dataclass(frozen=True)
class TokenRequest:
    """One HTTP POST to the token endpoint."""

    url: str
    headers: dict[str, str]
    body: bytes


def token_request(oidc: OidcSettings) -> TokenRequest:
    """The client_credentials request for `oidc`'s client."""
    form = {"grant_type": "client_credentials"}
    if oidc.scope:
        form["scope"] = oidc.scope
    pair = f"{quote_plus(oidc.client_id)}:{quote_plus(oidc.client_secret)}"
    basic = base64.b64encode(pair.encode("utf-8")).decode("ascii")
    headers = {
        "Authorization": f"Basic {basic}",
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    return TokenRequest(oidc.token_endpoint_url, headers, urlencode(form).encode("ascii"))


def access_token(body: bytes) -> str:
    """The access token of a token endpoint's answer; TokenRefused saying why there is none."""
    if len(body) > TOKEN_RESPONSE_BYTES_MAX:
        raise TokenRefused(
            f"the token endpoint answered more than {TOKEN_RESPONSE_BYTES_MAX} bytes"
        )
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        raise TokenRefused("the token endpoint's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise TokenRefused("the token endpoint's answer is not a JSON object")
    if "error" in answer:
        description = answer.get("error_description")
        detail = f": {str(description)[:200]}" if description else ""
        raise TokenRefused(f"the token endpoint refused: {str(answer['error'])[:64]}{detail}")
    token = answer.get("access_token")
    if not isinstance(token, str) or not token:
        raise TokenRefused("the token endpoint's answer has no access_token")
    token_type = answer.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenRefused(
            f"the token endpoint issued a {str(token_type)[:32]!r} token, not Bearer"
        )
    return token

"""Goal: the Node client's OAUTHBEARER settings and token request (clients/node/oauthbearer.js,
through sasl.js) match the Python SDK's (samsa_client/oidc_token.py) and librdkafka's names:
the OIDC keys are required and checked when the client is made, SCRAM's keys are refused beside
them (and theirs beside SCRAM), the client_credentials request form-encodes the id and secret
before HTTP Basic as the Python SDK does (byte for byte), and an answer without a Bearer token,
or an OAuth error answer, is a refusal saying why.

Method: the modules under `node`, no server and no network (the token request is built, not
sent; tests/integration/test_node_oauthbearer.py logs in against a real cluster and provider).
"""

from __future__ import annotations

import json

from node_script import needs_node, run_node_script

from samsa.client.oidc_token import token_request
from samsa.common.tls import OidcSettings

pytestmark = needs_node

SETTINGS = """
const sasl = require(process.argv[1]);
console.log(JSON.stringify(%s.map((options) => {
  try {
    return { ok: sasl.saslSettings(options) };
  } catch (error) {
    return { error: error.name, message: error.message };
  }
})));
"""

OIDC = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "oauthbearer",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
    "sasl.oauthbearer.client.id": "svc orders",
    "sasl.oauthbearer.client.secret": "s3cr:t&",
}


def settings(*options: dict[str, str]) -> list[dict[str, object]]:
    return run_node_script(SETTINGS % json.dumps(list(options)), "sasl.js")


def test_the_oidc_settings_are_taken_and_checked() -> None:
    taken, scope = settings(OIDC, OIDC | {"sasl.oauthbearer.scope": "produce"})
    assert taken == {
        "ok": {
            "mechanism": "OAUTHBEARER",
            "oidc": {
                "url": "https://idp.example/token",
                "clientId": "svc orders",
                "clientSecret": "s3cr:t&",
                "scope": None,
            },
        }
    }
    assert scope["ok"]["oidc"]["scope"] == "produce"  # type: ignore[index]


def test_a_wrong_or_missing_setting_is_refused_naming_it() -> None:
    no_secret = {k: v for k, v in OIDC.items() if k != "sasl.oauthbearer.client.secret"}
    scram = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}
    refused = settings(
        no_secret,
        OIDC | {"sasl.username": "alice"},
        OIDC | {"sasl.oauthbearer.method": "default"},
        OIDC | {"sasl.oauthbearer.token.endpoint.url": "file:///etc/token"},
        scram | {"sasl.username": "a", "sasl.password": "p", "sasl.oauthbearer.client.id": "x"},
    )
    assert {r.get("error") for r in refused} == {"SaslConfigError"}
    assert [r["message"] for r in refused] == [
        "sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.client.secret, a non-empty string",
        "sasl.username does not apply to sasl.mechanism=OAUTHBEARER: its login is a token from "
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.method=default: only oidc (a client_credentials token endpoint) is "
        "supported",
        "sasl.oauthbearer.token.endpoint.url must be an http:// or https:// URL, not file:",
        "sasl.oauthbearer.client.id applies only to sasl.mechanism=OAUTHBEARER",
    ]


REQUEST = """
const oauth = require(process.argv[1]);
const oidc = %s;
const request = oauth.tokenRequest(oidc);
const refused = (message) => new Error(message);
const answers = %s.map((text) => {
  try {
    return { token: oauth.accessToken(text, refused) };
  } catch (error) {
    return { refused: error.message };
  }
});
const message = oauth.bearerMessage('abc.def.ghi').toString('latin1');
console.log(JSON.stringify({ request, answers, message }));
"""


def test_the_token_request_is_the_python_sdks_and_answers_are_read() -> None:
    oidc = {"url": "https://idp.example/token", "clientId": "svc orders", "scope": "a b"}
    oidc["clientSecret"] = "s3cr:t&"
    answers = [
        json.dumps({"access_token": "abc.def.ghi", "token_type": "Bearer", "expires_in": 60}),
        json.dumps({"access_token": "abc.def.ghi"}),
        json.dumps({"error": "invalid_client", "error_description": "bad secret"}),
        json.dumps({"access_token": "x", "token_type": "mac"}),
        json.dumps({"token_type": "Bearer"}),
        "<html>",
    ]
    out = run_node_script(REQUEST % (json.dumps(oidc), json.dumps(answers)), "oauthbearer.js")
    python = token_request(
        OidcSettings("https://idp.example/token", "svc orders", "s3cr:t&", "a b")
    )
    assert out["request"] == {
        "url": python.url,
        "headers": python.headers,
        "body": python.body.decode("ascii"),
    }
    assert out["answers"] == [
        {"token": "abc.def.ghi"},
        {"token": "abc.def.ghi"},
        {"refused": "the token endpoint refused: invalid_client: bad secret"},
        {"refused": 'the token endpoint issued a "mac" token, not Bearer'},
        {"refused": "the token endpoint's answer has no access_token"},
        {"refused": "the token endpoint's answer is not JSON"},
    ]
    assert out["message"] == "n,,\x01auth=Bearer abc.def.ghi\x01\x01"

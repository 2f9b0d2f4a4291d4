"""The Node.js client logging in with SASL/OAUTHBEARER (clients/node/oauthbearer.js) to a real
cluster, with a token from an OIDC provider.

Goal: with `sasl.mechanism` OAUTHBEARER and librdkafka's OIDC keys (the Python SDK's names),
the Node client gets a token by the client_credentials grant, logs in with it and carries the
session ticket on every call: example.js produces and consumes what it produced, record for
record, with the secret taken from $SAMSA_SASL_OAUTHBEARER_CLIENT_SECRET. A wrong secret fails
the call with gRPC UNAUTHENTICATED (which no retry loop retries) and the provider's refusal.

Method: the loopback token endpoint of oidc_provider.py (RS256 JWTs; its JWKS in a file the
services read by a file:// URL); `local_cluster(..., sasl=True)` with OAUTHBEARER enabled beside
SCRAM: 1 controller, 2 brokers, 1 coordinator, real processes serving TLS, every one stopped by
PID also on failure; the topic made with the Python Admin logged in as the SCRAM admin. Skipped
when `node` or clients/node/node_modules is missing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cluster_helpers import local_cluster
from jwt_minting import jwks
from node_helpers import NODE, NODE_DIR, SETTINGS, node_script, skip_module_without_node
from oidc_provider import AUDIENCE, ISSUER, SECRETS, IdentityProvider, token_url_fixture

from samsa.client import Admin

skip_module_without_node()

pytestmark = pytest.mark.timeout(180)

TOPIC = "node-oauth"
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED.value[0]
DESCRIBE = """
try {
  return { brokers: (await client.describeCluster()).brokers.length };
} catch (error) {
  return { code: error.code, message: error.message };
}
"""

token_url = token_url_fixture()


@dataclass(frozen=True)
class OAuthCluster:
    bootstrap: str
    ca: str
    token_url: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, token_url: str) -> Iterator[OAuthCluster]:
    data_dir = tmp_path_factory.mktemp("node-oauth")
    jwks_file = Path(tmp_path_factory.mktemp("idp")) / "jwks.json"
    jwks_file.write_bytes(jwks(IdentityProvider.key))
    settings = SETTINGS | {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    }
    with local_cluster(data_dir, 1, 2, settings, coordinators=1, sasl=True) as running:
        security = running.spec.client_security(data_dir)
        with Admin({"bootstrap.servers": running.spec.bootstrap_servers, **security}) as admin:
            admin.create_topic(TOPIC, 1, 2)
        bootstrap = ",".join(broker.endpoint for broker in running.spec.brokers)
        yield OAuthCluster(bootstrap, security["ssl.ca.location"], token_url)


def oidc_options(cluster: OAuthCluster, secret: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": cluster.ca,
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": cluster.token_url,
        "sasl.oauthbearer.client.id": "svc-orders",
        "sasl.oauthbearer.client.secret": secret,
    }


def example(cluster: OAuthCluster, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """example.js logged in with OIDC flags, the secret in the environment, not on argv."""
    flags = [
        *("--security-protocol", "SASL_SSL", "--ssl-ca-location", cluster.ca),
        *("--sasl-mechanism", "OAUTHBEARER"),
        *("--sasl-oauthbearer-token-endpoint-url", cluster.token_url),
        *("--sasl-oauthbearer-client-id", "svc-orders"),
    ]
    environment = os.environ | {"SAMSA_SASL_OAUTHBEARER_CLIENT_SECRET": SECRETS["svc-orders"]}
    return subprocess.run(
        [NODE, str(NODE_DIR / "example.js"), "--bootstrap", cluster.bootstrap, *flags, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )


def test_example_js_produces_and_consumes_logged_in_with_a_token(cluster: OAuthCluster) -> None:
    lines = "".join(f"k{n}:v{n}\n" for n in range(10))
    produced = example(cluster, "produce", TOPIC, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    consumed = example(cluster, "consume", TOPIC, "--from", "0", "--count", "10")
    assert consumed.returncode == 0, consumed.stderr
    values = [line.split('"value":"')[1].split('"')[0] for line in consumed.stdout.splitlines()]
    assert values == [f"v{n}" for n in range(10)]


def test_a_wrong_secret_is_refused_unauthenticated(cluster: OAuthCluster) -> None:
    refused = node_script(cluster.bootstrap, TOPIC, DESCRIBE, **oidc_options(cluster, "wrong"))
    assert isinstance(refused, dict)
    assert refused["code"] == UNAUTHENTICATED, refused
    assert "SASL/OAUTHBEARER login failed" in str(refused["message"]), refused
    assert "invalid_client" in str(refused["message"]), refused
    right = node_script(
        cluster.bootstrap, TOPIC, DESCRIBE, **oidc_options(cluster, SECRETS["svc-orders"])
    )
    assert right == {"brokers": 2}

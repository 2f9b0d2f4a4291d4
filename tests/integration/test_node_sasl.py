"""The Node.js client logging in with SASL/SCRAM (clients/node/sasl.js) to a real cluster.

Goal: with `security.protocol` SASL_SSL, `sasl.mechanism`, `sasl.username` and `sasl.password`
(the Python SDK's and librdkafka's names) the Node client runs one SCRAM exchange and carries
its session ticket on every call: example.js produces and consumes what it produced, record for
record, as the user made with the Python Admin. A wrong password fails the call with gRPC
UNAUTHENTICATED (which no retry loop retries) and a message saying the login was refused; a
client that does not log in is refused by the cluster's gate the same way, naming the settings.

Method: `local_cluster(..., sasl=True)`: 1 controller, 2 brokers, 1 coordinator, real processes
serving TLS without client certificates and requiring a login, every one stopped by PID also on
failure; the user `nodeuser` and the topic made with the Python Admin logged in as admin. The
Node client runs as example.js (flags) and as short scripts over samsa.js. Skipped when `node`
or clients/node/node_modules is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from cluster_helpers import local_cluster
from node_helpers import SETTINGS, node, node_script, skip_module_without_node

from samsa.client import Admin, ScramCredentialInfo, UserScramCredentialUpsertion

skip_module_without_node()

pytestmark = pytest.mark.timeout(180)

TOPIC = "node-sasl"
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED.value[0]
DESCRIBE = """
try {
  return { brokers: (await client.describeCluster()).brokers.length };
} catch (error) {
  return { code: error.code, message: error.message };
}
"""


@dataclass(frozen=True)
class SaslCluster:
    bootstrap: str
    ca: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslCluster]:
    data_dir = tmp_path_factory.mktemp("node-sasl")
    with local_cluster(data_dir, 1, 2, SETTINGS, coordinators=1, sasl=True) as running:
        security = running.spec.client_security(data_dir)
        with Admin({"bootstrap.servers": running.spec.bootstrap_servers, **security}) as admin:
            admin.create_topic(TOPIC, 1, 2)
            user = UserScramCredentialUpsertion(
                "nodeuser", ScramCredentialInfo("SCRAM-SHA-512", 8192), "node-secret"
            )
            assert admin.alter_user_scram_credentials([user]) == {"nodeuser": None}
        bootstrap = ",".join(broker.endpoint for broker in running.spec.brokers)
        yield SaslCluster(bootstrap, security["ssl.ca.location"])


def login_flags(cluster: SaslCluster, password: str = "node-secret") -> list[str]:
    return [
        *("--security-protocol", "SASL_SSL", "--ssl-ca-location", cluster.ca),
        *("--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "nodeuser"),
        *("--sasl-password", password),
    ]


def test_example_js_produces_and_consumes_logged_in(cluster: SaslCluster) -> None:
    lines = "".join(f"k{n}:v{n}\n" for n in range(10))
    produced = node(cluster.bootstrap, *login_flags(cluster), "produce", TOPIC, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    consumed = node(
        cluster.bootstrap, *login_flags(cluster), "consume", TOPIC, "--from", "0", "--count", "10"
    )
    assert consumed.returncode == 0, consumed.stderr
    values = [line.split('"value":"')[1].split('"')[0] for line in consumed.stdout.splitlines()]
    assert values == [f"v{n}" for n in range(10)]


def test_a_wrong_password_is_refused_unauthenticated(cluster: SaslCluster) -> None:
    options = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": cluster.ca,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "nodeuser",
        "sasl.password": "wrong",
    }
    refused = node_script(cluster.bootstrap, TOPIC, DESCRIBE, **options)
    assert isinstance(refused, dict)
    assert refused["code"] == UNAUTHENTICATED, refused
    assert "SASL authentication of nodeuser failed" in str(refused["message"]), refused
    assert "ERROR_CODE_SASL_AUTHENTICATION_FAILED" in str(refused["message"]), refused
    options["sasl.password"] = "node-secret"
    right = node_script(cluster.bootstrap, TOPIC, DESCRIBE, **options)
    assert right == {"brokers": 2}


def test_a_client_that_does_not_log_in_is_refused_by_the_gate(cluster: SaslCluster) -> None:
    tls_only = {"security.protocol": "SSL", "ssl.ca.location": cluster.ca}
    refused = node_script(cluster.bootstrap, TOPIC, DESCRIBE, **tls_only)
    assert isinstance(refused, dict)
    assert refused["code"] == UNAUTHENTICATED, refused
    assert "security.protocol=SASL_SSL" in str(refused["message"]), refused

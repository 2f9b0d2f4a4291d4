"""SASL/OAUTHBEARER end to end: SDK clients log in with tokens from an OIDC token endpoint.

Goal: with OAUTHBEARER enabled beside SCRAM on every process (the JWKS read from a file:// URL,
the audience and issuer checked), a producer and a consumer configured with
sasl.mechanism=OAUTHBEARER and librdkafka's OIDC keys get a token by the client_credentials
grant, log in, and are `User:<sub>` for the ACLs: refused (TOPIC_AUTHORIZATION_FAILED) until a
grant names that principal, then they produce and consume in a group. A token for another
audience, and a wrong client secret, fail the login with AuthenticationError at once.

Method: the test runs a tiny OIDC token endpoint (http.server on loopback, in a thread of this
process) that signs RS256 JWTs with a key generated here, whose JWKS it writes to a file the
services read. 1 controller, 2 brokers and 1 coordinator (real processes, TLS, SASL, the
authorizer with the SCRAM admin as super user, every process stopped by PID also on failure)
started by `local_cluster(..., sasl=True, authorizer=True)` with the sasl.oauthbearer.* settings
in cluster.json. A grant is waited for, never slept on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until
from jwt_minting import jwks
from oidc_provider import AUDIENCE, ISSUER, SECRETS, IdentityProvider, token_url_fixture

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    AclBinding,
    Admin,
    AuthenticationError,
    AuthorizationError,
    Consumer,
    ProduceError,
    Producer,
)
from samsa.client.errors import AUTHORIZATION_CODES
from samsa.common.errors import ErrorCode
from samsa.metadata.acls import Operation, PatternType, Permission, ResourceType

pytestmark = pytest.mark.timeout(300)

RECORDS = 20

token_url = token_url_fixture()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("oauth-cluster")
    jwks_file = Path(tmp_path_factory.mktemp("idp")) / "jwks.json"
    jwks_file.write_bytes(jwks(IdentityProvider.key))
    settings = FAST_SETTINGS | {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    }
    with local_cluster(
        data_dir, 1, 2, settings, coordinators=1, sasl=True, authorizer=True
    ) as running:
        with Admin(admin_config(running)) as admin:
            admin.create_topic("orders", 2, 2)
        yield running


def admin_config(cluster: LocalCluster) -> dict[str, object]:
    """The SCRAM super user's configuration (the launcher's admin)."""
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        **cluster.spec.client_security(cluster.data_dir),
    }


def oauth_config(
    cluster: LocalCluster, token_url: str, client_id: str, secret: str
) -> dict[str, object]:
    """A client logging in with OAUTHBEARER as `client_id` (TLS as the admin's)."""
    tls = {k: v for k, v in admin_config(cluster).items() if not str(k).startswith("sasl.")}
    return {
        **tls,
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": token_url,
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": secret,
    }


def allow(principal: str, operation: Operation, kind: ResourceType, name: str) -> AclBinding:
    return AclBinding(kind, name, PatternType.LITERAL, principal, "*", operation, Permission.ALLOW)


def test_an_oidc_client_is_user_sub_for_the_acls_and_produces_and_consumes(
    cluster: LocalCluster, token_url: str
) -> None:
    client = oauth_config(cluster, token_url, "svc-orders", SECRETS["svc-orders"])
    with Producer({**client, "acks": "all"}) as producer:
        refused = producer.send("orders", b"too early")
        with pytest.raises(AuthorizationError) as raised:
            refused.result(30)
    assert raised.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, raised.value
    assert "User:svc-orders may not" in str(raised.value), raised.value
    with Admin(admin_config(cluster)) as admin:
        bindings = [
            allow("User:svc-orders", Operation.WRITE, ResourceType.TOPIC, "orders"),
            allow("User:svc-orders", Operation.READ, ResourceType.TOPIC, "orders"),
            allow("User:svc-orders", Operation.READ, ResourceType.GROUP, "order-readers"),
        ]
        assert set(admin.create_acls(bindings).values()) == {None}

    def produced() -> bool:
        with Producer({**client, "acks": "all"}) as producer:
            futures = [producer.send("orders", b"o%d" % n) for n in range(RECORDS)]
            try:
                for future in futures:
                    future.result(30)
            except (AuthorizationError, ProduceError) as error:
                # the grant has not reached the leaders, or the coordinator (InitProducerId's
                # IdempotentWrite, implied by WRITE on a topic), yet
                if error.code not in AUTHORIZATION_CODES:
                    raise
                return False
        return True

    wait_until("svc-orders' grants applied on the brokers", produced, timeout_s=60)
    consumer_config = {**client, "group.id": "order-readers", "auto.offset.reset": "earliest"}
    with Consumer(consumer_config) as consumer:
        consumer.subscribe(["orders"])
        values: set[bytes] = set()

        def read_all() -> bool:
            values.update(record.value for record in consumer.poll(1.0))
            return len(values) >= RECORDS

        wait_until("svc-orders reads orders in its group", read_all, timeout_s=60)
        consumer.commit()
    assert values == {b"o%d" % n for n in range(RECORDS)}


def test_a_token_for_another_audience_or_a_wrong_secret_fails_the_login(
    cluster: LocalCluster, token_url: str
) -> None:
    client = oauth_config(cluster, token_url, "svc-orders", SECRETS["svc-orders"])
    IdentityProvider.audience = "another-cluster"
    try:
        with Admin(client) as admin, pytest.raises(AuthenticationError) as raised:
            admin.list_topics()
    finally:
        IdentityProvider.audience = AUDIENCE
    assert "OAuth client 'svc-orders' (OAUTHBEARER)" in str(raised.value), raised.value
    assert "token is invalid" in str(raised.value), raised.value
    wrong = oauth_config(cluster, token_url, "svc-orders", "wrong-secret")
    with Admin(wrong) as admin, pytest.raises(AuthenticationError) as raised:
        admin.list_topics()
    assert "invalid_client" in str(raised.value), raised.value
    with Admin(client) as admin:  # the right audience again: the same client logs in
        admin.list_topics()

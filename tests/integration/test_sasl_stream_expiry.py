"""A SASL session never outlives its ticket, on a long-lived stream too (KIP-368).

Goal: with OAuth tokens that live 4 s (so every session ticket does: a session is capped at its
token's exp), an idempotent producer and a consumer in a group keep producing and fetching on
their ProduceStream and FetchStream across several sessions, every record acknowledged and read
exactly once, with no AuthenticationError, in both of the SDK's ways: it reopens an idle stream
once its ticket is due for renewal (proactive); and, with that turned off, the broker ends the
streams at their tickets' expiry (UNAUTHENTICATED, code 58, `samsa-sasl-session: expired`) and
the SDK logs in again, reopens them and retries what was waiting; a transactional producer's
commits go through its TransactionStream meeting those expiries too. A stream ended because its
SCRAM credential was deleted is still a refusal: the producer's records fail with
AuthenticationError.

Method: 1 controller, 1 broker and 1 coordinator (real processes, TLS, SASL with SCRAM and
OAUTHBEARER, no authorizer; every process stopped by PID also on failure) started by
`local_cluster(..., sasl=True)`, and the test's OIDC token endpoint (tests/helpers/
oidc_provider.py) issuing 4-second tokens. Reopened streams and expiries are counted from the
SDK's log lines (produce_sender, fetch_link, sasl_login.stream_expired), waited for, never slept
on; the proactive way is turned off by patching AioChannels.stream_stale. sasl.session.lifetime.ms
keeps its allowed default (the token bounds the session).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until
from jwt_minting import jwks
from oidc_provider import AUDIENCE, ISSUER, SECRETS, IdentityProvider, token_url_fixture

from samsa.cli.launcher import LocalCluster
from samsa.client import (
    Admin,
    AuthenticationError,
    Consumer,
    Producer,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
    produce_sender,
    sasl_login,
)
from samsa.client.channels import AioChannels
from samsa.client.record_future import RecordFuture
from samsa.common import fetch_link

pytestmark = pytest.mark.timeout(300)

TOKEN_LIFETIME_S = 4
RENEWALS = 4  # streams reopened (or ended at expiry), producer's and consumer's together

token_url = token_url_fixture()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("stream-expiry-cluster")
    jwks_file = Path(tmp_path_factory.mktemp("idp")) / "jwks.json"
    jwks_file.write_bytes(jwks(IdentityProvider.key))
    settings = FAST_SETTINGS | {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "offsets.topic.num.partitions": "1",
    }
    with local_cluster(data_dir, 1, 1, settings, coordinators=1, sasl=True) as running:
        with Admin(admin_config(running)) as admin:
            admin.create_topic("events-True", 2, 1)
            admin.create_topic("events-False", 2, 1)
            admin.create_topic("audit", 1, 1)
            admin.create_topic("txn-events", 1, 1)
        yield running


def admin_config(cluster: LocalCluster) -> dict[str, object]:
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        **cluster.spec.client_security(cluster.data_dir),
    }


def tls_only(cluster: LocalCluster) -> dict[str, object]:
    return {k: v for k, v in admin_config(cluster).items() if not str(k).startswith("sasl.")}


def oauth_client(cluster: LocalCluster, token_url: str) -> dict[str, object]:
    return {
        **tls_only(cluster),
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": token_url,
        "sasl.oauthbearer.client.id": "svc-orders",
        "sasl.oauthbearer.client.secret": SECRETS["svc-orders"],
    }


def expiries(caplog: pytest.LogCaptureFixture) -> int:
    return sum("SASL session expired" in r.getMessage() for r in caplog.records)


@pytest.fixture
def short_tokens() -> Iterator[None]:
    IdentityProvider.lifetime_s = TOKEN_LIFETIME_S
    try:
        yield
    finally:
        IdentityProvider.lifetime_s = 600


@pytest.mark.parametrize("proactive", [True, False], ids=["reopened-when-due", "ended-at-expiry"])
def test_streams_outlive_many_sessions_with_every_record_once(
    cluster: LocalCluster,
    token_url: str,
    short_tokens: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    proactive: bool,
) -> None:
    for logger in (sasl_login.log, produce_sender.log, fetch_link.log):
        caplog.set_level(logging.INFO, logger=logger.name)
    if not proactive:
        monkeypatch.setattr(AioChannels, "stream_stale", lambda self, generation: False)
    wanted = "reopened for a fresh SASL ticket" if proactive else "SASL session expired"
    client = oauth_client(cluster, token_url)
    futures: list[RecordFuture] = []
    read: list[bytes] = []

    def renewals() -> int:
        return sum(wanted in r.getMessage() for r in caplog.records)

    producer_config = {**client, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    group = f"readers-{proactive}"
    consumer_config = {**client, "group.id": group, "auto.offset.reset": "earliest"}
    with Producer(producer_config) as producer, Consumer(consumer_config) as consumer:
        consumer.subscribe([topic := f"events-{proactive}"])

        def produced_and_read_across_sessions() -> bool:
            futures.append(producer.send(topic, b"e%d" % len(futures)))
            read.extend(record.value for record in consumer.poll(0.2))
            return renewals() >= RENEWALS

        wait_until(
            "streams ended at their sessions' expiry", produced_and_read_across_sessions, 180
        )
        producer.flush(60)
        offsets = [future.result(30) for future in futures]  # AuthenticationError would raise
        sent = {b"e%d" % n for n in range(len(futures))}

        def all_read() -> bool:
            read.extend(record.value for record in consumer.poll(0.5))
            return set(read) >= sent

        wait_until("every record read", all_read, 60)
    written = [(m.partition, m.offset) for m in offsets if m.offset >= 0]
    assert len(written) == len(set(written)), "no two records at one offset"
    assert sorted(read) == sorted(sent), "each record read once"


def test_a_transactional_producer_commits_across_sessions_ended_at_expiry(
    cluster: LocalCluster,
    token_url: str,
    short_tokens: None,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The TransactionStream (EndTxn) and the ProduceStream meet their tickets' expiry (the
    reopening when due turned off): each commit still succeeds, each record is read once."""
    caplog.set_level(logging.INFO, logger=sasl_login.log.name)
    monkeypatch.setattr(AioChannels, "stream_stale", lambda self, generation: False)
    client = oauth_client(cluster, token_url)
    committed: list[bytes] = []
    with Producer({**client, "transactional.id": "txn-app", "linger.ms": 5}) as producer:
        producer.init_transactions(30)

        def one_transaction() -> bool:
            producer.begin_transaction()
            value = b"t%d" % len(committed)
            producer.send("txn-events", value)
            producer.commit_transaction(30)  # AuthenticationError, a KafkaError, would raise
            committed.append(value)
            return expiries(caplog) >= RENEWALS

        wait_until("transactions across expired sessions", one_transaction, 180)
    readers = {**client, "group.id": "txn-readers", "auto.offset.reset": "earliest"}
    read: list[bytes] = []
    with Consumer({**readers, "isolation.level": "read_committed"}) as consumer:
        consumer.subscribe(["txn-events"])

        def all_read() -> bool:
            read.extend(record.value for record in consumer.poll(0.5))
            return set(read) >= set(committed)

        wait_until("every committed record read", all_read, 60)
    assert sorted(read) == sorted(committed), "each committed record read once"


def test_a_deleted_credential_still_ends_a_producers_stream_with_authentication_error(
    cluster: LocalCluster,
) -> None:
    with Admin(admin_config(cluster)) as admin:
        info = ScramCredentialInfo("SCRAM-SHA-256")
        upsert = UserScramCredentialUpsertion("dave", info, "dave-secret")
        assert admin.alter_user_scram_credentials([upsert]) == {"dave": None}
        dave = {
            **tls_only(cluster),
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "dave",
            "sasl.password": "dave-secret",
        }
        with Producer({**dave, "acks": "all", "enable.idempotence": True}) as producer:
            wait_until("dave logged in", lambda: producer.send("audit", b"a").result(30) or True)
            deletion = UserScramCredentialDeletion("dave", "SCRAM-SHA-256")
            assert admin.alter_user_scram_credentials([deletion]) == {"dave": None}

            def refused() -> AuthenticationError | None:
                try:
                    producer.send("audit", b"b").result(30)
                except AuthenticationError as error:
                    return error
                return None  # the broker has not replayed the deletion yet

            error = wait_until("dave's stream ended by the deletion", refused)
    assert "deleted or replaced" in str(error), error

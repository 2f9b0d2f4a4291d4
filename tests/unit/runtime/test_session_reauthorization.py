"""Goal: with an authorizer, an incremental fetch (unary Fetch or a FetchStream message) is
refused as soon as its caller may no longer READ a topic its broker-side fetch session covers,
even though the fetch names no partition of it; the steady state (same ACLs object, same caller)
decides no ACL at all; a follower's session is not looked up for a consumer.

Method: Authorization.refusal, as the interceptor calls it for each call and each stream
message, bound to a real FetchSessionCache (the broker's) through `consumer_session`; sessions
filled with FetchSession.update as the broker's fetch does; `authorize` counted by patching the
module's reference. ACLs are replaced by new objects as the metadata image replaces them.
"""

from __future__ import annotations

import pytest

from samsa.metadata.acls import (
    AclBinding,
    Acls,
    AuthorizerSettings,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.broker.requests.fetch_session import FetchSessionCache
from samsa.services.runtime import authorization as authorization_module
from samsa.services.runtime.authorization import Authorization
from samsa.v1 import broker_pb2

ALICE = "User:alice"
FETCH = "/samsa.v1.BrokerService/Fetch"
FETCH_STREAM = "/samsa.v1.BrokerService/FetchStream"


def read(topic: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, topic, PatternType.LITERAL, ALICE, "*", Operation.READ, Permission.ALLOW
    )


class Broker:
    """A broker's fetch sessions and its current ACLs, as the authorizer sees them."""

    def __init__(self, acls: Acls) -> None:
        self.acls = acls
        self.sessions = FetchSessionCache()
        self.authorization = Authorization(
            settings=AuthorizerSettings(),
            rules=PrincipalRules.parse("DEFAULT"),
            acls=lambda: self.acls,
            member_key=b"k" * 32,
            fetch_session=self.sessions.consumer_session,
        )

    def open(self, *topics: str, replica_id: int = -1) -> int:
        session, _ = self.sessions.open(replica_id, 0)
        assert session is not None
        for topic in topics:
            session.update((topic, 0), broker_pb2.FetchRequest.PartitionData(partition=0))
        return session.session_id

    def refusal(self, method: str, request: broker_pb2.FetchRequest) -> str | None:
        message = request
        if method == FETCH_STREAM:
            message = broker_pb2.FetchStreamRequest(request=request)
        return self.authorization.refusal(method, message, ALICE, "127.0.0.1")


def incremental(session_id: int, *, forget: str | None = None) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(session_id=session_id, session_epoch=1)
    if forget is not None:
        request.forgotten_topics.add(name=forget, partitions=[0])
    return request


@pytest.mark.parametrize("method", [FETCH, FETCH_STREAM])
def test_a_revoked_topic_of_the_session_refuses_the_next_incremental_fetch(method: str) -> None:
    broker = Broker(Acls.empty().with_added([read("orders"), read("audit")]))
    session_id = broker.open("orders", "audit")
    assert broker.refusal(method, incremental(session_id)) is None
    broker.acls = broker.acls.without([read("audit")])  # a new object, as the image makes it
    refusal = broker.refusal(method, incremental(session_id))
    assert refusal is not None
    assert refusal.startswith(f"{ALICE} may not READ topic audit (no ALLOW ACL")
    # The fetch that forgets it goes on; the next one, the topic gone, is granted again.
    assert broker.refusal(method, incremental(session_id, forget="audit")) is None
    broker.sessions.consumer_session(session_id).forget(("audit", 0))  # as the broker does
    assert broker.refusal(method, incremental(session_id)) is None


def test_the_steady_state_decides_no_acl(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker(Acls.empty().with_added([read("orders")]))
    session_id = broker.open("orders")
    calls: list[str] = []
    real = authorization_module.authorize

    def counted(*args):
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(authorization_module, "authorize", counted)
    assert broker.refusal(FETCH_STREAM, incremental(session_id)) is None
    assert calls == ["orders"]  # the first fetch decides the session
    for _ in range(100):
        assert broker.refusal(FETCH_STREAM, incremental(session_id)) is None
    assert calls == ["orders"]
    broker.acls = broker.acls.with_added([read("other")])
    assert broker.refusal(FETCH_STREAM, incremental(session_id)) is None
    assert calls == ["orders", "orders"]  # decided again once, for the change


def test_only_sessions_that_exist_and_are_consumers_are_decided() -> None:
    broker = Broker(Acls.empty())
    followers = broker.open("orders", replica_id=2)
    assert broker.refusal(FETCH, incremental(followers)) is None  # the broker refuses it
    assert broker.refusal(FETCH, incremental(12345)) is None  # FETCH_SESSION_ID_NOT_FOUND
    mine = broker.open("orders")
    assert broker.refusal(FETCH, incremental(mine)) is not None

"""Who may go on fetching in a fetch session: its topics decided again whenever the ACLs change.

Theory of operation. A fetch in a session (KIP-227, services/broker/requests/fetch_session.py)
names only the partitions whose position changed; the broker answers from every partition the
session holds. Deciding only the topics a fetch names (access_rules) therefore let a consumer
read on after its READ ACL was deleted, for as long as its session lived, and let any caller
naming a session id read what it covers. So, as Kafka does, an incremental fetch is allowed only
when its caller may READ every topic the session covers.

Deciding them all at every fetch would walk the session each time. Instead a session keeps the
`SessionGrant` it was last decided under: the ACLs object (the metadata image's: immutable, so a
change is a new object), the principal and the host. A fetch whose ACLs and caller are those is
admitted by identity (one `is`, two string compares); otherwise every topic the session covers
is decided, and the grant is recorded once all are allowed. The topics a fetch adds to the
session are named in it, so decided as it is read (access_rules) under the same ACLs object:
the grant stays sound as the session grows.

A refused topic refuses the fetch, unless the fetch forgets every partition of it (a consumer
dropping the topic); that fetch is admitted but records no grant (if the broker refuses the
fetch, say for its epoch, the session still holds the topic, and the next fetch decides again).

The session's topics are keyed by name, as the broker's session keys them. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.metadata.acls import Acls

PartitionKey = tuple[str, int]

# The RPCs whose requests may fetch in a session: a FetchRequest, or a FetchStreamRequest
# carrying one.
FETCH = "/samsa.v1.BrokerService/Fetch"
FETCH_STREAM = "/samsa.v1.BrokerService/FetchStream"


@dataclass(frozen=True)
class SessionGrant:
    """The ACLs and caller under which every topic of a session was last allowed."""

    acls: Acls | None = None
    principal: str = ""
    host: str = ""


NO_GRANT = SessionGrant()


class CoveredSession(Protocol):
    """What this module needs of a broker's fetch session."""

    grant: SessionGrant

    @property
    def partitions(self) -> Mapping[PartitionKey, Any]: ...


def incremental_fetch(method: str, request: Any) -> tuple[int, Any] | None:
    """(session id, the FetchRequest) when this call's request fetches within an existing
    session (session_id set, epoch > 0); None otherwise: a sessionless, opening or closing
    fetch names every partition it reads."""
    if method == FETCH_STREAM:
        request = request.request
    elif method != FETCH:
        return None
    if request.session_id and request.session_epoch > 0:
        return request.session_id, request
    return None


def covered_topics(
    keys: Iterable[PartitionKey], forgotten: Collection[PartitionKey] = ()
) -> list[str]:
    """The topics of `keys` with a partition not in `forgotten`, each once, in first-seen order."""
    return list(dict.fromkeys(key[0] for key in keys if key not in forgotten))


def forgotten_keys(request: Any) -> set[PartitionKey]:
    """The partitions a FetchRequest forgets."""
    return {
        (topic.name, partition)
        for topic in request.forgotten_topics
        for partition in topic.partitions
    }


def refused_topic(
    session: CoveredSession,
    acls: Acls,
    principal: str,
    host: str,
    allowed: Callable[[str], bool],
    forgotten: Callable[[], Collection[PartitionKey]] = lambda: (),
) -> str | None:
    """The first topic of `session` that `principal` at `host` may not read under `acls` (as
    `allowed` decides), and that the fetch does not forget; None when the fetch may go on.
    Records the grant when every topic is allowed (see the module doc)."""
    grant = session.grant
    if grant.acls is acls and grant.principal == principal and grant.host == host:
        return None
    refused = [topic for topic in covered_topics(session.partitions) if not allowed(topic)]
    if not refused:
        session.grant = SessionGrant(acls, principal, host)
        return None
    kept = set(covered_topics(session.partitions, forgotten()))
    return next((topic for topic in refused if topic in kept), None)

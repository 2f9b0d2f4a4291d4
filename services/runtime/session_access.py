"""Who may go on fetching in a fetch session: its topics decided again whenever the ACLs change.

Theory of operation. A fetch in a session (KIP-227, services/broker/requests/fetch_session.py)
names only the partitions whose position changed; the broker answers from the session's
partitions that changed. Each partition it reads is decided by the fetch handler (a topic the
caller may not READ answers TOPIC_AUTHORIZATION_FAILED, as Kafka answers per partition), so no
record of a refused topic ever leaves; but a partition that does not change is not read, and
its consumer would not learn that its READ was deleted until the next append. So, as Kafka
decides every partition of the session at each fetch, a fetch whose ACLs or caller changed
since the session was last decided walks the session's topics once and marks the partitions of
the refused ones dirty: the fetch reads them, and answers them TOPIC_AUTHORIZATION_FAILED.

Walking them at every fetch would cost the session's size each time. Instead a session keeps the
`SessionGrant` it was last decided under: the ACLs object (the metadata image's: immutable, so a
change is a new object), the principal and the host. A fetch whose ACLs and caller are those
walks nothing (one `is`, two string compares). The topics a fetch adds to the session are named
in it, so read (and decided) by that fetch.

The session's topics are keyed by name, as the broker's session keys them. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.metadata.acls import Acls

PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class SessionGrant:
    """The ACLs and caller under which the topics of a session were last decided."""

    acls: Acls | None = None
    principal: str = ""
    host: str = ""


NO_GRANT = SessionGrant()


class CoveredSession(Protocol):
    """What this module needs of a broker's fetch session."""

    grant: SessionGrant
    dirty: set[PartitionKey]

    @property
    def partitions(self) -> Mapping[PartitionKey, Any]: ...


def covered_topics(keys: Iterable[PartitionKey]) -> list[str]:
    """The topics of `keys`, each once, in first-seen order."""
    return list(dict.fromkeys(key[0] for key in keys))


def same_grant(grant: SessionGrant, other: SessionGrant) -> bool:
    """Whether two grants are the same ACLs object and the same caller."""
    return (
        grant.acls is other.acls
        and grant.principal == other.principal
        and (grant.host == other.host)
    )


def mark_refused(
    session: CoveredSession, grant: SessionGrant, refused: Callable[[str], str | None]
) -> list[str]:
    """Under a new `grant`: mark dirty every partition of the session's topics `refused` names
    a reason for, and record the grant. The refused topics; none (and nothing walked) when the
    session was last decided under this grant."""
    if same_grant(session.grant, grant):
        return []
    topics = [topic for topic in covered_topics(session.partitions) if refused(topic) is not None]
    if topics:
        chosen = set(topics)
        session.dirty.update(key for key in session.partitions if key[0] in chosen)
    session.grant = grant
    return topics

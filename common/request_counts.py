"""The one refusal of a request that names too many items, and its one wording.

Why the rule exists. Every server counts what a request names before it looks at any of it, and
refuses the whole request (RESOURCE_EXHAUSTED, or INVALID_ARGUMENT where only a broken peer can
send more) when the count is over the limit in common/limits.py: each item is looked at and
answered on the event loop, which serves every other request, partition and group of that process
meanwhile. A gRPC message bounds the bytes, not the count: a Fetch of 490,000 topic entries naming
no partition (1 MB) held a broker's loop about a second, and 900,000 empty topic entries (1.8 MB)
held a coordinator's 1.6 s.

Hence the nested rule: the entries that hold the items (topic entries, a WriteTxnMarkers request's
markers) count as well as the items, each against the same limit, because an empty entry is looked
at and answered too. No useful request has more entries than items, so this refuses nothing a
client that splits its requests by the item limit sends. Checking each count is the same rule as
checking the larger of the two.

Pure: the callers choose the status and send the message; a message says how many were named and
how many to send at most, so a client knows how to split.
"""

from __future__ import annotations

from collections.abc import Iterable

TOPIC_ENTRIES = "topic entries"


def too_many(number: int, what: str, limit: int, suffix: str = "") -> str | None:
    """Why a request naming `number` `what` is refused, or None when `number` is within `limit`.

    `suffix` carries a site's hint after the limit (" per partition, or encoded batches")."""
    assert limit >= 0, limit
    if number <= limit:
        return None
    return f"{number} {what} in one request; send at most {limit}{suffix}"


def too_many_nested(
    items: int,
    what: str,
    *,
    entries: int,
    limit: int,
    entries_what: str = TOPIC_ENTRIES,
    suffix: str = "",
) -> str | None:
    """Why a request naming `items` `what` in `entries` entries (topic entries unless
    `entries_what` says otherwise) is refused, or None: each count against `limit`, the items'
    first, since they are what a client splits by."""
    refusal = too_many(items, what, limit, suffix)
    if refusal is not None:
        return refusal
    return too_many(entries, entries_what, limit, suffix)


def named_twice(names: Iterable[str], what: str) -> str | None:
    """Why a request naming one of `names` (each `what`, e.g. "group id") twice is refused, or
    None. An answer holds one entry per name asked, so a name repeated up to the count limit
    multiplied the answer by that much: a 10 KB DescribeGroups naming one group 1,000 times,
    whose member subscribed to 188 KB of topic names, built a 188 MB answer."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return f"{what} {name!r} is named twice: name each once"
        seen.add(name)
    return None

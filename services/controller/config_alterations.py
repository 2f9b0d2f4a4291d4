"""Alterations of one resource's configs (IncrementalAlterConfigs' SET, DELETE, APPEND,
SUBTRACT) and the ConfigRecords that store the result: pure, shared by topics' configs
(config_control.py), the cluster-wide defaults (cluster_defaults_control.py) and a broker's
throttle rates (broker_throttle_control.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# The topic configs that are lists (KIP-339's APPEND and SUBTRACT take them).
LIST_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
)


def altered_twice(
    alterations: Iterable[c.IncrementalAlterConfigsRequest.Alteration],
) -> tuple[int, str] | None:
    """INVALID_REQUEST naming the configs a request alters more than once, or None."""
    names = Counter(alteration.name for alteration in alterations)
    twice = sorted(name for name, count in names.items() if count > 1)
    if twice:
        return ErrorCode.INVALID_REQUEST, f"config {', '.join(twice)} is altered twice"
    return None


def altered(
    current: dict[str, str],
    alterations: Iterable[c.IncrementalAlterConfigsRequest.Alteration],
    default_of: Callable[[str], str],
    lists: frozenset[str] = LIST_CONFIGS,
) -> dict[str, str] | tuple[int, str]:
    """`current` with the alterations made (the names are known), or why not; APPEND and
    SUBTRACT start from `default_of(name)` when the name is not set."""
    updated = dict(current)
    for alteration in alterations:
        name, value = alteration.name, alteration.value
        if alteration.op == c.ALTER_CONFIG_OP_SET:
            updated[name] = value
        elif alteration.op == c.ALTER_CONFIG_OP_DELETE:
            updated.pop(name, None)
        elif alteration.op in (c.ALTER_CONFIG_OP_APPEND, c.ALTER_CONFIG_OP_SUBTRACT):
            if name not in lists:
                return ErrorCode.INVALID_CONFIG, f"{name} is not a list; use SET or DELETE"
            items = _list_items(updated.get(name, default_of(name)))
            if alteration.op == c.ALTER_CONFIG_OP_APPEND:
                items += [item for item in dict.fromkeys(_list_items(value)) if item not in items]
            else:
                items = [item for item in items if item not in _list_items(value)]
            updated[name] = ",".join(items)
        else:
            return ErrorCode.INVALID_REQUEST, f"alteration of {name} has no op (SET, DELETE, …)"
    return updated


def config_records(
    resource_type: int, resource_name: str, current: dict[str, str], updated: dict[str, str]
) -> list[m.MetadataRecord]:
    """The ConfigRecords that take a resource's configs from `current` to `updated`."""
    records = []
    for name in sorted(current.keys() | updated.keys()):
        if current.get(name) == updated.get(name):
            continue
        record = m.ConfigRecord(
            resource_type=resource_type,  # type: ignore[arg-type]
            resource_name=resource_name,
            name=name,
        )
        if name in updated:
            record.value = updated[name]
        records.append(m.MetadataRecord(config=record))
    return records


def _list_items(text: str) -> list[str]:
    """A list config's items, as KIP-339's APPEND and SUBTRACT take them, from its value or
    from the operation's (both comma-separated lists, as in Kafka's controller): without the
    spaces and empty items that the list parser (LogConfig) ignores too, so that SUBTRACT
    'delete' removes ' delete' from 'compact, delete' instead of answering success unchanged."""
    return [item for item in (part.strip() for part in text.split(",")) if item]

"""What `samsa groups` prints, and the group states `list --state` reads. Pure: no I/O, tested
on hand-made SDK dataclasses (group_commands.py fetches and prints).

`describe` has Kafka's views (kafka-consumer-groups.sh --describe): the head line (`--state`:
state, epochs, assignor, member count), the members table (`--members`), the lag table
(`--offsets`, what `lag` prints), or the head and members (no flag). A table does not name its
group, so when several groups are shown each of those blocks opens with a `group G` line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from samsa.cli.command_support import table
from samsa.client.admin import ConsumerGroupDescription, PartitionLag
from samsa.client.group_admin import (
    STATE_NAMES,
    ConsumerGroupListing,
    GroupError,
    TopicPartition,
)

# The states `list --state` takes: Kafka's names, as the coordinator reports them.
GROUP_STATES = tuple(STATE_NAMES.values())


def group_states_of(values: Iterable[str]) -> tuple[set[str], list[str]]:
    """`--state` values (repeatable, or comma-separated as Kafka's tool takes them, in any case)
    as state names ("stable" -> "Stable"), and the values that name none of ours."""
    by_lower = {state.lower(): state for state in GROUP_STATES}
    parts = [part.strip() for value in values for part in value.split(",")]
    known = {by_lower[part.lower()] for part in parts if part.lower() in by_lower}
    return known, [part for part in parts if part.lower() not in by_lower]


def listing_lines(listings: Iterable[ConsumerGroupListing]) -> str:
    """The groups table (`list`; the coordinators filtered any --state)."""
    rows = [(x.group_id, x.state, x.member_count) for x in listings]
    return table(("group", "state", "members"), rows) if rows else "no groups"


def format_partitions(partitions: Sequence[TopicPartition]) -> str:
    """("orders", 0), ("orders", 1), ("audit", 2) -> "audit:2 orders:0,1"; "-" for none."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def describe_head(group: ConsumerGroupDescription) -> str:
    """One line, the view of `describe --state`."""
    return (
        f"group {group.group_id}  state {group.state}  group epoch {group.group_epoch}  "
        f"assignment epoch {group.assignment_epoch}  assignor {group.assignor or '-'}  "
        f"members {len(group.members)}"
    )


def members_lines(group: ConsumerGroupDescription, titled: bool = False) -> str:
    """The members table, the view of `describe --members`; `titled` names the group above it."""
    if not group.members:
        return f"group {group.group_id} has no members"
    rows = [
        (
            m.member_id,
            m.group_instance_id or "-",
            m.client_id or "-",
            m.member_epoch,
            format_partitions(m.assignment),
            format_partitions(m.target_assignment),
        )
        for m in group.members
    ]
    headers = ("member", "instance", "client", "epoch", "assignment", "target")
    return (f"group {group.group_id}\n" if titled else "") + table(headers, rows)


def describe_lines(group: ConsumerGroupDescription) -> str:
    """The head line, then the members table when there are members: `describe` by default."""
    head = describe_head(group)
    return head + "\n\n" + members_lines(group) if group.members else head


def describe_view_lines(group: ConsumerGroupDescription, view: str, titled: bool) -> str:
    """`describe` in one of its views but --offsets: "state", "members" or "all" (no flag)."""
    if view == "state":
        return describe_head(group)
    if view == "members":
        return members_lines(group, titled)
    assert view == "all", f"describe has no view {view!r}"
    return describe_lines(group)


def lag_lines(group_id: str, rows: Sequence[PartitionLag], titled: bool = False) -> str:
    """The lag table and its total; unknown values ("-") are left out of the total and said.
    `titled` names the group above the table."""
    if not rows:
        return f"group {group_id} has no committed offsets and owns no partitions"

    def known(value: int) -> object:
        return value if value >= 0 else "-"

    cells = [
        (
            r.topic,
            r.partition,
            known(r.committed_offset),
            known(r.log_end_offset),
            known(r.lag),
            r.member_id or "-",
        )
        for r in rows
    ]
    headers = ("topic", "partition", "committed", "log end", "lag", "owner")
    unknown = sum(1 for r in rows if r.lag < 0)
    total = f"total lag {sum(r.lag for r in rows if r.lag >= 0)}"
    if unknown:
        total += f" ({unknown} partition(s) unknown: nothing committed or no log end offset)"
    title = f"group {group_id}\n" if titled else ""
    return title + table(headers, cells) + "\n\n" + total


def delete_offsets_lines(outcomes: Mapping[TopicPartition, GroupError | None]) -> str:
    """Kafka's table for --delete-offsets: each partition, Successful or the error's code."""
    rows = [
        (topic, partition, "Successful" if error is None else f"Error: {error.code.name}")
        for (topic, partition), error in sorted(outcomes.items())
    ]
    return table(("topic", "partition", "status"), rows)

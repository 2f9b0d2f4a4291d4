"""The files and words of `samsa reassign` (Kafka's kafka-reassign-partitions.sh), pure: the
reassignment JSON read and written, the topics-to-move JSON and --broker-list read, the
proposal --generate prints, and the status lines --verify prints. reassign_commands.py talks to
the cluster.

The reassignment JSON is Kafka's: {"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[2,3]}]} ("log_dirs" and any other key are ignored; a missing "version" reads as 1).
A file that is not that is refused whole, before anything is sent, with one line naming the
entry and the field to fix: a plan applied in part is worse than none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from samsa.client.cluster_admin import PartitionInfo

TopicPartition = tuple[str, int]
INT32_MAX = 2**31 - 1
EXAMPLE = '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}'
TOPICS_EXAMPLE = '{"version":1,"topics":[{"topic":"t"}]}'


def _refuse(source: str, problem: str) -> NoReturn:
    raise SystemExit(f"samsa reassign: {source}: {problem}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX


def _document(text: str, source: str, field: str, example: str) -> list[Any]:
    """The list under `field` of a JSON object of version 1, or exit naming what is wrong."""
    try:
        document = json.loads(text)
    except ValueError as error:
        _refuse(source, f"not JSON ({error}); expected e.g. {example}")
    if not isinstance(document, dict):
        _refuse(source, f"expected a JSON object such as {example}")
    if document.get("version", 1) != 1:
        _refuse(source, f'"version" is {document["version"]!r}; only version 1 is known')
    entries = document.get(field)
    if not isinstance(entries, list):
        _refuse(source, f'"{field}" must be a list, as in {example}')
    if not entries:
        _refuse(source, f'"{field}" is empty: nothing to do')
    return entries


def parse_reassignment_json(text: str, source: str) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's target replica list, in the file's order."""
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    first_at: dict[TopicPartition, int] = {}
    for index, entry in enumerate(_document(text, source, "partitions", EXAMPLE)):
        where = f"partitions[{index}]"
        if not isinstance(entry, dict):
            _refuse(source, f'{where} must be an object with "topic", "partition" and "replicas"')
        topic, number, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            _refuse(source, f'{where}: "topic" must be a topic name (a string), not {topic!r}')
        if not _is_int(number):
            _refuse(source, f'{where}: "partition" must be a partition number >= 0, not {number!r}')
        where = f"{where} ({topic}-{number})"
        if not isinstance(replicas, list) or not replicas:
            _refuse(
                source,
                f'{where}: "replicas" must be a non-empty list of broker ids, not '
                f"{json.dumps(replicas)}",
            )
        if bad := [r for r in replicas if not _is_int(r)]:
            _refuse(source, f'{where}: "replicas" holds {json.dumps(bad[0])}, not a broker id >= 0')
        if len(set(replicas)) != len(replicas):
            _refuse(source, f'{where}: "replicas" {json.dumps(replicas)} names a broker twice')
        key = (topic, number)
        if key in first_at:
            _refuse(source, f"{where} comes twice (also partitions[{first_at[key]}])")
        first_at[key] = index
        targets[key] = tuple(replicas)
    return targets


def parse_topics_to_move(text: str, source: str) -> list[str]:
    """The topic names of Kafka's topics-to-move JSON, each once, in the file's order."""
    names: list[str] = []
    for index, entry in enumerate(_document(text, source, "topics", TOPICS_EXAMPLE)):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            _refuse(source, f'topics[{index}] must be an object such as {{"topic": "t"}}')
        if topic not in names:
            names.append(topic)
    return names


def parse_broker_list(text: str) -> list[int]:
    """--broker-list's broker ids, in order, or exit saying what is wrong."""
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() and _is_int(int(item)) for item in items):
        raise SystemExit(
            f"samsa reassign: --broker-list {text!r} is not a list of broker ids such as 1,2,3"
        )
    brokers = [int(item) for item in items]
    if len(set(brokers)) != len(brokers):
        raise SystemExit(f"samsa reassign: --broker-list {text!r} names a broker twice")
    return brokers


def plan_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's reassignment JSON of `assignment`, one line, by topic and partition."""
    partitions = [
        {"topic": topic, "partition": number, "replicas": list(assignment[(topic, number)])}
        for topic, number in sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def propose_assignment(
    current: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int]
) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's replicas spread round-robin over `brokers`, keeping its replica count:
    partition k of the i-th partition overall leads on broker i mod n and its followers take
    the next brokers in the list, so leaders and replicas are spread evenly across topics.
    Exits when a partition has more replicas than there are brokers to hold them."""
    proposal: dict[TopicPartition, tuple[int, ...]] = {}
    count = len(brokers)
    for index, key in enumerate(sorted(current)):
        factor = len(current[key])
        if factor > count:
            raise SystemExit(
                f"samsa reassign: partition {key[0]}-{key[1]} has {factor} replicas but "
                f"--broker-list names {count} broker(s): name at least {factor}"
            )
        proposal[key] = tuple(brokers[(index + step) % count] for step in range(factor))
    return proposal


def verify_lines(
    targets: Mapping[TopicPartition, Sequence[int]], found: Mapping[TopicPartition, PartitionInfo]
) -> tuple[list[str], bool]:
    """--verify's line per partition and whether every one reached its target. A partition is
    still moving while it has replicas being added or removed; once none are, it is complete
    when its replicas are the target's, in order (as Kafka's tool compares them)."""
    lines, done = [], True
    for (topic, number), target in targets.items():
        info = found[(topic, number)]
        name = f"{topic}-{number}"
        if info.adding_replicas or info.removing_replicas:
            lines.append(f"Reassignment of partition {name} is still in progress.")
            done = False
        elif tuple(info.replicas) == tuple(target):
            lines.append(f"Reassignment of partition {name} is complete.")
        else:
            now, wanted = ",".join(map(str, info.replicas)), ",".join(map(str, target))
            lines.append(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{now} rather than {wanted}."
            )
            done = False
    return lines, done

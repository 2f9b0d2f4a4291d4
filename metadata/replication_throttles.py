"""Replication throttle configs (KIP-73): their names, their syntax, and where they live. Pure.

Theory of operation. Moving a partition (`samsa reassign`) makes its new replicas copy it from
the leader as fast as they can; an operator caps that copy with two kinds of dynamic configs,
Kafka's names and meanings:

- broker configs, per broker (the broker resource named by its id, `--entity-type brokers
  --entity-name 1`): `leader.replication.throttled.rate` caps the bytes per second this broker
  sends, as a leader, to throttled replicas; `follower.replication.throttled.rate` the bytes
  per second it fetches, as a follower, for throttled replicas. Default: Long.MAX (unthrottled).
  Samsa takes them per broker only, not as a cluster-wide default (`--entity-default` holds
  topic defaults only, metadata/topic_defaults.py).
- topic configs: `leader.replication.throttled.replicas` and
  `follower.replication.throttled.replicas`, each a comma-separated list of
  `partition:brokerId` pairs, or `*` for every replica of the topic. A broker throttles, on
  each side, the partitions of the topic whose list names it (or `*`).

Both live in the metadata log as ConfigRecords (the broker's under its id's resource name), so
every broker reads them from its image. Values are validated by the controller before they are
stored (`parse_rate`, `parse_throttled_replicas` raise InvalidConfigError saying what to fix); a
broker reading an unparsable value from an older controller's log treats it as unset.

Which replicas are throttled at run time (never one in the ISR) is the broker's business:
services/broker/replica/replication_throttle.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.common.errors import InvalidConfigError
from samsa.metadata.image import BROKER_RESOURCE, MetadataImage

LONG_MAX = 2**63 - 1
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
REPLICAS_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
# The largest broker id or partition a pair may name (Kafka's INT).
INT_MAX = 2**31 - 1

RATE_DOC = (
    "Bytes per second this broker {side} for throttled replicas (the topics' "
    "{side_key} lists); Long.MAX: unthrottled. A replica in the ISR is never throttled."
)
REPLICAS_DOC = (
    "partition:brokerId pairs (or *) whose replica on that broker is throttled on the {side} "
    "side while it is not in the ISR (KIP-73), at the broker's {rate}."
)


@dataclass(frozen=True)
class ThrottledReplicas:
    """A parsed `*.replication.throttled.replicas` value: every replica (`*`) or some pairs."""

    every: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()

    def covers(self, partition: int, broker_id: int) -> bool:
        """Whether the replica of `partition` on `broker_id` is named."""
        return self.every or (partition, broker_id) in self.pairs


NONE = ThrottledReplicas()


def parse_throttled_replicas(key: str, text: str) -> ThrottledReplicas:
    """The replicas `text` names (see the module doc); InvalidConfigError naming `key` and what
    to write instead. Empty text names none (Kafka's default)."""
    stripped = text.strip()
    if stripped == "*":
        return ThrottledReplicas(every=True)
    pairs: set[tuple[int, int]] = set()
    for item in stripped.split(",") if stripped else []:
        parts = item.strip().split(":")
        numbers = [part.strip() for part in parts]
        if len(numbers) != 2 or not all(n.isascii() and n.isdigit() for n in numbers):
            raise InvalidConfigError(
                f"{key}: {item.strip()[:40]!r} is not a partition:brokerId pair; write a "
                "comma-separated list such as 0:1,0:2,1:2, or * for every replica"
            )
        partition, broker_id = int(numbers[0]), int(numbers[1])
        if partition > INT_MAX or broker_id > INT_MAX:
            raise InvalidConfigError(f"{key}: {item.strip()[:40]!r} is beyond a 32-bit id")
        pairs.add((partition, broker_id))
    return ThrottledReplicas(pairs=frozenset(pairs))


def parse_rate(key: str, text: str) -> int:
    """A throttle rate in bytes per second; InvalidConfigError when it is not a long >= 0."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) or int(stripped) > LONG_MAX:
        raise InvalidConfigError(
            f"{key}={text[:40]!r} must be a number of bytes per second from 0 to {LONG_MAX} "
            "(delete the config for no throttle)"
        )
    return int(stripped)


def broker_rates(image: MetadataImage, broker_id: int) -> tuple[int, int]:
    """(leader rate, follower rate) set for `broker_id`, Long.MAX where unset (or unparsable:
    see the module doc)."""
    configs: Mapping[str, str] = image.configs.get((BROKER_RESOURCE, str(broker_id)), {})
    rates = []
    for key in RATE_KEYS:
        try:
            rates.append(parse_rate(key, configs[key]) if key in configs else LONG_MAX)
        except InvalidConfigError:
            rates.append(LONG_MAX)
    return rates[0], rates[1]


def topic_throttled(configs: Mapping[str, str], key: str) -> ThrottledReplicas:
    """The replicas a topic's `key` names (NONE when unset or unparsable)."""
    text = configs.get(key)
    if not text:
        return NONE
    try:
        return parse_throttled_replicas(key, text)
    except InvalidConfigError:
        return NONE

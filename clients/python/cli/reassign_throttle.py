"""`samsa reassign --throttle`: the replication throttles (KIP-73) a move runs under, as Kafka's
kafka-reassign-partitions.sh sets and clears them. Thin over Admin.alter_configs.

--execute --throttle R sets, before the move starts:
- on every broker that holds or will hold a replica of a moved partition (the broker resource
  named by its id), `leader.replication.throttled.rate` and `follower.replication.throttled.rate`
  to R bytes per second;
- on every moved topic, `leader.replication.throttled.replicas` to the partitions' current
  replicas (the leaders the new replicas may copy from) and
  `follower.replication.throttled.replicas` to the replicas being added, as partition:broker
  pairs. A replica in the ISR is never throttled, so the partitions' writes are not slowed.

--verify, once every partition of the plan is complete, removes those four configs (the rates
from every registered broker, the lists from the plan's topics) and says so; with
--preserve-throttles it keeps them. While a partition is still moving nothing is removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from samsa.client import Admin, ConfigResource

TopicPartition = tuple[str, int]
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def parse_throttle(text: str | None) -> int | None:
    """The --throttle value in bytes per second (None: not given); SystemExit when it is not a
    positive integer."""
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise SystemExit(
            f"samsa reassign: --throttle {text[:40]!r} must be a positive number of bytes per "
            "second, such as 10000000"
        )
    return int(text)


def throttle_lists(
    current: Mapping[TopicPartition, Iterable[int]],
    targets: Mapping[TopicPartition, Iterable[int]],
) -> dict[str, dict[str, str]]:
    """Each moved topic's throttled-replica lists (see the module doc). Pure."""
    lists: dict[str, dict[str, list[str]]] = {}
    for (topic, number), target in sorted(targets.items()):
        before = list(current[(topic, number)])
        added = [broker for broker in target if broker not in before]
        if not added:
            continue  # nothing copied: nothing to throttle
        topic_lists = lists.setdefault(topic, {LEADER_REPLICAS: [], FOLLOWER_REPLICAS: []})
        topic_lists[LEADER_REPLICAS] += [f"{number}:{broker}" for broker in before]
        topic_lists[FOLLOWER_REPLICAS] += [f"{number}:{broker}" for broker in added]
    return {topic: {k: ",".join(v) for k, v in pairs.items()} for topic, pairs in lists.items()}


def set_throttles(
    admin: Admin,
    rate: int,
    current: Mapping[TopicPartition, Iterable[int]],
    targets: Mapping[TopicPartition, Iterable[int]],
) -> None:
    """Set the rates on the brokers involved and the lists on the moved topics."""
    lists = throttle_lists(current, targets)
    brokers = sorted(
        {b for key in targets for b in (*current[key], *targets[key]) if key[0] in lists}
    )
    for broker in brokers:
        admin.alter_configs(
            ConfigResource("broker", str(broker)), set=dict.fromkeys(RATE_KEYS, str(rate))
        )
    for topic, configs in lists.items():
        admin.alter_configs(topic, set=configs)
    if brokers:
        print(
            f"The inter-broker throttle limit was set to {rate} B/s on brokers "
            f"{','.join(map(str, brokers))}"
        )


def clear_throttles(admin: Admin, topics: Iterable[str]) -> None:
    """Remove the rates from every registered broker and the lists from `topics`."""
    brokers = sorted(b.broker_id for b in admin.describe_cluster().brokers)
    for broker in brokers:
        admin.alter_configs(ConfigResource("broker", str(broker)), delete=RATE_KEYS)
    names = sorted(set(topics))
    for topic in names:
        admin.alter_configs(topic, delete=(LEADER_REPLICAS, FOLLOWER_REPLICAS))
    print(
        f"Throttle was removed: the rates from brokers {','.join(map(str, brokers))}, the "
        f"throttled replicas from topics {','.join(names)}"
    )

"""Cluster-wide topic defaults (KIP-226's `--entity-type brokers --entity-default`): pure.

Theory of operation. Kafka's operators set the defaults of every topic with broker keys
(`log.retention.ms`, `log.segment.bytes`, `message.max.bytes`, …), each the *synonym* of a topic
key, and change them at run time for the whole cluster. Samsa stores them as Kafka's KRaft does:
ConfigRecords of the broker resource with the empty name, replayed into the image beside the
topics' configs (`image.configs[(BROKER_RESOURCE, "")]`) and carried by snapshots like any config.

A topic's effective configs are, lowest first: the built-in defaults (LogConfig's, Kafka's), the
cluster defaults, the topic's own configs (its overrides). The internal topics keep what their
coordinators' writes need (INTERNAL_PINNED_KEYS): for those keys the cluster default does not
apply to them, their own default (INTERNAL_TOPIC_LOG_DEFAULTS) or the built-in one does, so that
no cluster-wide setting can make a coordinator's write be refused.

Only per-cluster defaults, never per broker (`--entity-name 1`): a topic's log must behave the
same on every replica (a follower that rolled or retained differently from its leader would
serve another log), so Samsa keeps topic defaults cluster-wide only.

Synonyms, as Kafka resolves them: `log.retention.ms` wins over `log.retention.minutes`, which
wins over `log.retention.hours` (a negative result means "forever": -1); `log.roll.ms` wins over
`log.roll.hours`. Values are validated by the controller (services/runtime/topic_defaults_check.py)
before they are stored; here they are only read.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.metadata.coordinators import INTERNAL_TOPIC_LOG_DEFAULTS, INTERNAL_TOPICS
from samsa.metadata.image import BROKER_RESOURCE, MetadataImage

# The name of the broker resource that holds the cluster-wide defaults (Kafka's `<default>`).
CLUSTER_DEFAULT_NAME = ""
CLUSTER_DEFAULT_KEY = (BROKER_RESOURCE, CLUSTER_DEFAULT_NAME)

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS

# Broker key -> the topic key it defaults, with Kafka's reason for the name. Only the keys whose
# topic key Samsa has (no min.compaction.lag.ms, no log.flush.scheduler.interval.ms).
BROKER_DEFAULT_KEYS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.hours": "segment.ms",  # synonym, in hours; log.roll.ms wins
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.minutes": "retention.ms",  # synonym, in minutes; below log.retention.ms
    "log.retention.hours": "retention.ms",  # synonym, in hours; below log.retention.minutes
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",  # Kafka's broker name is the other way round
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}

# Synonyms of one topic key in Kafka's order of precedence, with the unit each is written in.
SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", MINUTE_MS),
        ("log.retention.hours", HOUR_MS),
    ),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
}

# Keys Kafka types as INT (32-bit) among the synonyms; the others follow their topic key's type.
INT_SYNONYMS = frozenset({"log.retention.minutes", "log.retention.hours", "log.roll.hours"})

# What the coordinators' writes to the internal topics need (topic_configs.py,
# validate_internal_topic_configs): the cluster default never applies to these there.
INTERNAL_PINNED_KEYS = frozenset(
    {"max.message.bytes", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms"}
)


def cluster_defaults(image: MetadataImage) -> Mapping[str, str]:
    """The cluster-wide defaults as set (broker keys -> values); empty when none are."""
    return image.configs.get(CLUSTER_DEFAULT_KEY, {})


def topic_defaults(broker_configs: Mapping[str, str]) -> dict[str, str]:
    """The topic keys (-> values) the cluster defaults `broker_configs` set, synonyms resolved
    (see the module doc). A synonym whose value is not an integer is skipped: the controller
    validated it, so it can only come from an older controller's log."""
    defaults: dict[str, str] = {}
    for broker_key, value in broker_configs.items():
        topic_key = BROKER_DEFAULT_KEYS.get(broker_key)
        if topic_key is not None and topic_key not in SYNONYMS:
            defaults[topic_key] = value
    for topic_key, synonyms in SYNONYMS.items():
        for broker_key, unit_ms in synonyms:
            if broker_key not in broker_configs:
                continue
            text = broker_configs[broker_key]
            if unit_ms == 1:
                defaults[topic_key] = text
                break
            try:
                millis = int(text) * unit_ms
            except ValueError:
                continue
            defaults[topic_key] = str(-1 if millis < 0 else millis)
            break
    return defaults


def defaults_for_topic(topic: str, broker_configs: Mapping[str, str]) -> dict[str, str]:
    """The defaults a topic takes below its own configs: the cluster's (but not the pinned keys
    of an internal topic), then an internal topic's own defaults over them."""
    defaults = topic_defaults(broker_configs)
    if topic in INTERNAL_TOPICS:
        defaults = {k: v for k, v in defaults.items() if k not in INTERNAL_PINNED_KEYS}
        defaults |= INTERNAL_TOPIC_LOG_DEFAULTS
    return defaults


def effective_topic_configs(
    image: MetadataImage, topic: str, overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The topic's configs as they apply (the built-in defaults aside): its defaults below its
    own configs (`overrides`, else the image's)."""
    own = image.topic_configs(topic) if overrides is None else overrides
    return {**defaults_for_topic(topic, cluster_defaults(image)), **own}


def default_sources(topic: str, broker_configs: Mapping[str, str]) -> dict[str, str]:
    """Topic key -> the broker key its cluster default comes from (the synonym that wins), for
    the keys the cluster defaults set for `topic` (DescribeConfigs)."""
    sources: dict[str, str] = {}
    for topic_key in topic_defaults(broker_configs):
        if topic in INTERNAL_TOPICS and topic_key in INTERNAL_PINNED_KEYS:
            continue
        synonyms = [key for key, _ in SYNONYMS.get(topic_key, ())] or [
            key for key, mapped in BROKER_DEFAULT_KEYS.items() if mapped == topic_key
        ]
        sources[topic_key] = next(key for key in synonyms if key in broker_configs)
    return sources

"""IncrementalAlterConfigs of the cluster-wide topic defaults (KIP-226's broker
`--entity-default`): the broker resource named "" (metadata/topic_defaults.py). Pure.

A per-broker name ("1") takes no topic default: Samsa keeps topic defaults cluster-wide only,
because a topic's log must behave the same on every replica (a departure from Kafka, which also
takes per-broker defaults); it takes only the broker's replication throttle rates
(broker_throttle_control.py). New defaults are refused when a topic's effective configs would become
invalid under them, naming the first such topic (services/runtime/topic_defaults_check.py).

What follows a change, as for a topic's own config: the topics that take min.insync.replicas
from the default have their ELRs cleared where the ISR reaches the new value, and turning
unclean.leader.election.enable on elects a live replica of their offline partitions
(config_control.py does both for a topic's own change).
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.metadata.image import BROKER_RESOURCE, MetadataImage
from samsa.metadata.replication_throttles import RATE_KEYS
from samsa.metadata.topic_defaults import (
    BROKER_DEFAULT_KEYS,
    CLUSTER_DEFAULT_NAME,
    cluster_defaults,
    defaults_for_topic,
)
from samsa.services.controller.broker_throttle_control import (
    alter_broker_throttles,
    broker_id_of,
)
from samsa.services.controller.config_alterations import altered, altered_twice, config_records
from samsa.services.controller.eligible_leaders import (
    MIN_ISR_CONFIG,
    MIN_ISR_DEFAULT,
    cleared_for_min_isr,
)
from samsa.services.controller.unclean_election import UNCLEAN_CONFIG, unclean_elections
from samsa.services.runtime.topic_configs import TOPIC_KEYS
from samsa.services.runtime.topic_defaults_check import (
    first_broken_topic,
    validate_defaults_alone,
)
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# The cluster defaults that are lists (APPEND and SUBTRACT take them).
LIST_DEFAULTS = frozenset({"log.cleanup.policy"})

PER_BROKER_REFUSAL = (
    "Samsa keeps topic defaults cluster-wide only: alter the broker resource named '' "
    "(--entity-default), not broker {name!r}; a topic's log must behave the same on every "
    "replica. A broker id takes only its replication throttle rates (leader.replication."
    "throttled.rate, follower.replication.throttled.rate); other broker settings are given on "
    "the broker's command line"
)


def alter_cluster_defaults(
    image: MetadataImage, resource: c.IncrementalAlterConfigsRequest.Resource
) -> list[m.MetadataRecord] | tuple[int, str]:
    """The records that store the resource's alterations of the cluster defaults, and what
    follows them (see the module doc), or (error code, message)."""
    name = resource.resource.name
    if name != CLUSTER_DEFAULT_NAME:
        rates_only = all(alteration.name in RATE_KEYS for alteration in resource.alterations)
        if broker_id_of(name) is not None and rates_only:  # its replication throttle rates
            return alter_broker_throttles(image, resource)
        return ErrorCode.INVALID_REQUEST, PER_BROKER_REFUSAL.format(name=name[:40])
    if (twice := altered_twice(resource.alterations)) is not None:
        return twice
    for alteration in resource.alterations:
        if alteration.name not in BROKER_DEFAULT_KEYS:
            return ErrorCode.INVALID_CONFIG, (
                f"{alteration.name[:100]!r} is not a cluster-wide topic default; known: "
                f"{', '.join(sorted(BROKER_DEFAULT_KEYS))}"
            )
    current = dict(cluster_defaults(image))
    updated = altered(
        current,
        resource.alterations,
        lambda key: TOPIC_KEYS[BROKER_DEFAULT_KEYS[key]].default,
        LIST_DEFAULTS,
    )
    if isinstance(updated, tuple):
        return updated
    try:
        validate_defaults_alone(updated)
    except InvalidConfigError as error:
        return ErrorCode.INVALID_CONFIG, str(error)
    if (problem := first_broken_topic(image, current, updated)) is not None:
        return ErrorCode.INVALID_CONFIG, problem
    records = config_records(BROKER_RESOURCE, CLUSTER_DEFAULT_NAME, current, updated)
    return records + _follow_ups(image, current, updated) if records else []


def _follow_ups(
    image: MetadataImage, current: dict[str, str], updated: dict[str, str]
) -> list[m.MetadataRecord]:
    """ELR clearing and unclean elections of the topics that take the changed defaults."""
    live = {broker.broker_id for broker in image.live_brokers()}
    records: list[m.MetadataRecord] = []
    for topic in sorted(image.topics):
        own = image.topic_configs(topic)
        before = defaults_for_topic(topic, current)
        after = defaults_for_topic(topic, updated)
        if MIN_ISR_CONFIG not in own:
            old_min = int(before.get(MIN_ISR_CONFIG, MIN_ISR_DEFAULT))
            new_min = int(after.get(MIN_ISR_CONFIG, MIN_ISR_DEFAULT))
            if new_min != old_min:
                records += cleared_for_min_isr(image, topic, new_min)
        turned_on = before.get(UNCLEAN_CONFIG) != "true" and after.get(UNCLEAN_CONFIG) == "true"
        if UNCLEAN_CONFIG not in own and turned_on:
            records += unclean_elections(image, topic, live)
    return records

"""Validation of the cluster-wide topic defaults and of topics' configs under them: pure.

A topic's configs are valid only together with the defaults they sit on (metadata/
topic_defaults.py): `max.message.bytes` above `segment.bytes` is refused whether the topic set
one of them and the cluster default the other, or the cluster default both. So the controller
validates each topic's *effective* configs when a topic is created or altered, and every
topic's effective configs under new defaults before it stores them, refusing the first topic
(by name) the new defaults would break. The built-in defaults are LogConfig's, below both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from samsa.common import limits
from samsa.common.errors import InvalidConfigError
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.metadata.image import MetadataImage
from samsa.metadata.topic_defaults import (
    BROKER_DEFAULT_KEYS,
    INT_SYNONYMS,
    defaults_for_topic,
    topic_defaults,
)
from samsa.services.runtime.topic_configs import (
    INT_MAX,
    validate_internal_topic_configs,
    validate_topic_configs,
)

_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


def replication_factor(image: MetadataImage, topic: str) -> int:
    """The smallest target replica count among the topic's partitions (1 when it has none),
    the factor its min.insync.replicas is bounded by."""
    partitions = image.topics[topic].partitions.values()
    return min((len(p.target_replicas) for p in partitions), default=1)


def validate_defaults_alone(broker_configs: Mapping[str, str]) -> None:
    """Raise InvalidConfigError naming the key when a cluster default is unknown or its value
    is not one its topic key takes (whatever the topics)."""
    for key, value in broker_configs.items():
        if key not in BROKER_DEFAULT_KEYS:
            raise InvalidConfigError(
                f"{key!r} is not a cluster-wide topic default; known: "
                f"{', '.join(sorted(BROKER_DEFAULT_KEYS))}"
            )
        if len(value) > limits.config_value_length_max:
            raise InvalidConfigError(
                f"{key}: value of {len(value)} characters; at most {limits.config_value_length_max}"
            )
        if key in INT_SYNONYMS and (
            not _INTEGER.fullmatch(value.strip()) or not -INT_MAX - 1 <= int(value) <= INT_MAX
        ):
            raise InvalidConfigError(f"{key}={value[:40]!r} is not a 32-bit integer")
    try:
        validate_topic_configs(topic_defaults(broker_configs), limits.replication_factor_max)
    except InvalidConfigError as error:
        raise InvalidConfigError(f"as a cluster default: {error}") from error


def validate_effective(
    topic: str,
    overrides: Mapping[str, str],
    factor: int,
    broker_configs: Mapping[str, str],
) -> None:
    """Raise InvalidConfigError when the topic's own configs `overrides` are invalid, or are
    together with the cluster defaults `broker_configs` (the message says so)."""
    validate_topic_configs(overrides, factor)
    if topic in INTERNAL_TOPICS:
        validate_internal_topic_configs(overrides)
    effective = {**defaults_for_topic(topic, broker_configs), **overrides}
    try:
        validate_topic_configs(effective, factor)
        if topic in INTERNAL_TOPICS:
            validate_internal_topic_configs(effective)
    except InvalidConfigError as error:
        taken = sorted(k for k in effective if k not in overrides)
        raise InvalidConfigError(
            f"{error} (with the cluster-wide defaults of {', '.join(taken)}; set the topic's own "
            f"value or change the default)"
        ) from error


def first_broken_topic(
    image: MetadataImage, old_configs: Mapping[str, str], new_configs: Mapping[str, str]
) -> str | None:
    """Why the cluster defaults `new_configs` would make a topic's configs invalid, naming the
    first such topic by name; None when every topic stays valid. A topic already invalid under
    the defaults `old_configs` (stored by an older controller) does not block the change.
    Topics alike (the same own configs, replication factor and internal or not) are checked
    once: a cluster of thousands of topics mostly has a few kinds."""
    seen: dict[tuple[object, ...], str | None] = {}
    for name in sorted(image.topics):
        own = image.topic_configs(name)
        factor = replication_factor(image, name)
        kind = (tuple(sorted(own.items())), factor, name in INTERNAL_TOPICS)
        if kind not in seen:
            problem = _problem(name, own, factor, new_configs)
            if problem is not None and _problem(name, own, factor, old_configs) is not None:
                problem = None
            seen[kind] = problem
        if seen[kind] is not None:
            return f"the new defaults would make topic {name!r} invalid: {seen[kind]}"
    return None


def _problem(
    topic: str, own: Mapping[str, str], factor: int, broker_configs: Mapping[str, str]
) -> str | None:
    try:
        validate_effective(topic, own, factor, broker_configs)
    except InvalidConfigError as error:
        return str(error)
    return None

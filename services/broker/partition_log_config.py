"""A topic's log settings as a broker applies them: the log configs among a topic's configs,
parsed into a LogConfig (the internal topics' defaults first), once per distinct settings.
PartitionHost configures each hosted partition's log with them."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import fields

from samsa.common.errors import InvalidConfigError
from samsa.metadata.coordinators import INTERNAL_TOPIC_LOG_DEFAULTS, INTERNAL_TOPICS
from samsa.services.broker.log.config import LogConfig

log = logging.getLogger(__name__)

LOG_KEYS = frozenset(f.metadata["key"] for f in fields(LogConfig))


def log_config(configs: Mapping[str, str], topic: str = "") -> LogConfig:
    """The log settings among a topic's configs (the controller validated them)."""
    if topic in INTERNAL_TOPICS:
        configs = {**INTERNAL_TOPIC_LOG_DEFAULTS, **configs}
    return _log_config(tuple((k, v) for k, v in configs.items() if k in LOG_KEYS))


@functools.lru_cache(maxsize=1024)
def _log_config(settings: tuple[tuple[str, str], ...]) -> LogConfig:
    """Parsed and validated once per distinct settings (LogConfig is frozen): a leadership
    change of a topic's thousands of partitions parses its configs once, not once each.

    Settings this broker refuses although the controller stored them (an older controller
    validated less, or a bound was tightened since) fall back to their defaults, one by one,
    with an error logged once: refusing them stopped the broker at every start, as the metadata
    replays them (Kafka's broker logs a bad stored config too and goes on)."""
    try:
        return LogConfig.from_properties(dict(settings))
    except InvalidConfigError as error:
        kept: dict[str, str] = {}
        for key, value in settings:  # each one kept when it still holds with those before it
            try:
                LogConfig.from_properties({**kept, key: value})
            except InvalidConfigError:
                continue
            kept[key] = value
        ignored = sorted(key for key, _ in settings if key not in kept)
        log.error(
            "a topic's stored log configs are refused here; using the defaults for %s: %s",
            ", ".join(ignored),
            error,
        )
        return LogConfig.from_properties(kept)

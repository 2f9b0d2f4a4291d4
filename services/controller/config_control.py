"""Configuration decisions: IncrementalAlterConfigs, validated as a whole (DescribeConfigs is a
plain read: services/runtime/metadata_reads.py)."""

from __future__ import annotations

from collections import Counter

from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.metadata.image import TOPIC_RESOURCE, MetadataImage
from samsa.services.controller.control_result import ControlResult
from samsa.services.controller.eligible_leaders import cleared_on_min_isr_change
from samsa.services.controller.unclean_election import UNCLEAN_CONFIG, unclean_elections
from samsa.services.runtime.topic_configs import (
    TOPIC_KEYS,
    validate_internal_topic_configs,
    validate_topic_configs,
)
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

LIST_CONFIGS = frozenset({"cleanup.policy"})


# --- configs ---------------------------------------------------------------------------------


def incremental_alter_configs(
    image: MetadataImage, request: c.IncrementalAlterConfigsRequest
) -> ControlResult[c.IncrementalAlterConfigsResponse]:
    """Each resource's alterations, validated as a whole against the image. A resource named
    twice is refused (both times) and so is a config named twice in one resource, as Kafka's
    controller refuses them: each would be validated against the image alone, so the two
    results applied in order could make a config no check ever saw."""
    response = c.IncrementalAlterConfigsResponse()
    records: list[m.MetadataRecord] = []
    named = Counter((r.resource.type, r.resource.name) for r in request.resources)
    for resource in request.resources:
        result = response.results.add()
        result.resource.CopyFrom(resource.resource)
        if named[(resource.resource.type, resource.resource.name)] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST  # type: ignore[assignment]
            result.error_message = f"{resource.resource.name!r} is named twice in the request"
            continue
        outcome = _alter_topic(image, resource)
        if isinstance(outcome, tuple):
            result.error_code, result.error_message = outcome  # type: ignore[assignment]
        elif not request.validate_only:
            records += outcome
            records += cleared_on_min_isr_change(image, resource.resource.name, outcome)
            records += _elections_once_unclean(image, resource.resource.name, outcome)
    return ControlResult(records, response)


def _elections_once_unclean(
    image: MetadataImage, topic: str, changes: list[m.MetadataRecord]
) -> list[m.MetadataRecord]:
    """Turning unclean.leader.election.enable on elects a live replica of each offline
    partition of the topic at once, as Kafka's controller does: it is how an operator brings
    back a partition whose in-sync replicas are all gone."""
    turned_on = any(
        record.config.name == UNCLEAN_CONFIG and record.config.value == "true" for record in changes
    )
    if not turned_on:
        return []
    live = {broker.broker_id for broker in image.live_brokers()}
    return unclean_elections(image, topic, live)


def _alter_topic(
    image: MetadataImage, resource: c.IncrementalAlterConfigsRequest.Resource
) -> list[m.MetadataRecord] | tuple[int, str]:
    target = resource.resource
    if target.type != TOPIC_RESOURCE:
        return (
            ErrorCode.INVALID_REQUEST,
            "only topic configs are dynamic in this version; broker settings are given on the "
            "broker's command line",
        )
    topic = image.topics.get(target.name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {target.name!r} does not exist"
    names = Counter(alteration.name for alteration in resource.alterations)
    twice = sorted(name for name, count in names.items() if count > 1)
    if twice:
        return ErrorCode.INVALID_REQUEST, f"config {', '.join(twice)} is altered twice"
    current = dict(image.topic_configs(target.name))
    updated = dict(current)
    for alteration in resource.alterations:
        name, value = alteration.name, alteration.value
        if name not in TOPIC_KEYS:
            return ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}"
        if alteration.op == c.ALTER_CONFIG_OP_SET:
            updated[name] = value
        elif alteration.op == c.ALTER_CONFIG_OP_DELETE:
            updated.pop(name, None)
        elif alteration.op in (c.ALTER_CONFIG_OP_APPEND, c.ALTER_CONFIG_OP_SUBTRACT):
            if name not in LIST_CONFIGS:
                return ErrorCode.INVALID_CONFIG, f"{name} is not a list; use SET or DELETE"
            items = _list_items(updated.get(name, TOPIC_KEYS[name].default))
            if alteration.op == c.ALTER_CONFIG_OP_APPEND:
                items += [item for item in dict.fromkeys(_list_items(value)) if item not in items]
            else:
                items = [item for item in items if item not in _list_items(value)]
            updated[name] = ",".join(items)
        else:
            return ErrorCode.INVALID_REQUEST, f"alteration of {name} has no op (SET, DELETE, …)"
    factor = min((len(p.target_replicas) for p in topic.partitions.values()), default=1)
    try:
        validate_topic_configs(updated, factor)
        if target.name in INTERNAL_TOPICS:
            validate_internal_topic_configs(updated)
    except InvalidConfigError as error:
        return ErrorCode.INVALID_CONFIG, str(error)
    records = []
    for name in sorted(current.keys() | updated.keys()):
        if current.get(name) == updated.get(name):
            continue
        record = m.ConfigRecord(
            resource_type=TOPIC_RESOURCE,  # type: ignore[arg-type]
            resource_name=target.name,
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

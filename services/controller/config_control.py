"""Configuration decisions: IncrementalAlterConfigs, validated as a whole (DescribeConfigs is a
plain read: services/runtime/metadata_reads.py)."""

from __future__ import annotations

from collections import Counter

from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from samsa.metadata.topic_defaults import cluster_defaults, effective_topic_configs
from samsa.services.controller.cluster_defaults_control import alter_cluster_defaults
from samsa.services.controller.config_alterations import altered, altered_twice, config_records
from samsa.services.controller.control_result import ControlResult
from samsa.services.controller.eligible_leaders import cleared_on_min_isr_change
from samsa.services.controller.unclean_election import (
    UNCLEAN_CONFIG,
    unclean_allowed,
    unclean_elections,
)
from samsa.services.runtime.topic_configs import TOPIC_KEYS
from samsa.services.runtime.topic_defaults_check import replication_factor, validate_effective
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

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
        if resource.resource.type == BROKER_RESOURCE:
            defaults = alter_cluster_defaults(image, resource)
            if isinstance(defaults, tuple):
                result.error_code, result.error_message = defaults  # type: ignore[assignment]
            elif not request.validate_only:
                records += defaults
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
    back a partition whose in-sync replicas are all gone. On is the topic's own value, else the
    cluster-wide default (deleting an own "false" under a default "true" turns it on too)."""
    own = dict(image.topic_configs(topic))
    for record in changes:
        if record.config.HasField("value"):
            own[record.config.name] = record.config.value
        else:
            own.pop(record.config.name, None)
    after = effective_topic_configs(image, topic, overrides=own).get(UNCLEAN_CONFIG) == "true"
    if not after or unclean_allowed(image, topic):
        return []
    live = {broker.broker_id for broker in image.live_brokers()}
    return unclean_elections(image, topic, live)


def _alter_topic(
    image: MetadataImage, resource: c.IncrementalAlterConfigsRequest.Resource
) -> list[m.MetadataRecord] | tuple[int, str]:
    target = resource.resource
    if target.type != TOPIC_RESOURCE:
        return ErrorCode.INVALID_REQUEST, "the resource is neither a topic nor a broker"
    topic = image.topics.get(target.name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {target.name!r} does not exist"
    if (twice := altered_twice(resource.alterations)) is not None:
        return twice
    current = dict(image.topic_configs(target.name))
    for alteration in resource.alterations:
        if alteration.name not in TOPIC_KEYS:
            return ErrorCode.INVALID_CONFIG, f"unknown topic config {alteration.name!r}"
    updated = altered(current, resource.alterations, lambda name: TOPIC_KEYS[name].default)
    if isinstance(updated, tuple):
        return updated
    try:
        validate_effective(
            target.name, updated, replication_factor(image, target.name), cluster_defaults(image)
        )
    except InvalidConfigError as error:
        return ErrorCode.INVALID_CONFIG, str(error)
    return config_records(TOPIC_RESOURCE, target.name, current, updated)

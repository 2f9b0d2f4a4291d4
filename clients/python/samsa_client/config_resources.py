"""What Admin.describe_configs and Admin.alter_configs act on: a topic (its name) or the
cluster-wide topic defaults, `BROKER_DEFAULTS` (Kafka's ConfigResource(BROKER, ""), the
`--entity-type brokers --entity-default` of kafka-configs.sh, KIP-226). Pure.

The defaults are broker keys (`log.retention.ms`, `log.segment.bytes`, `message.max.bytes`, …)
that every topic without its own value of the matching topic key takes; the README lists them.
A broker named by its id (`ConfigResource("broker", "2")`) has no topic defaults of its own in
Samsa (the controller refuses them: a topic's log must behave the same on every replica); it
takes only its replication throttle rates (KIP-73: `leader.replication.throttled.rate`,
`follower.replication.throttled.rate`).
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

TOPIC = 1  # ConfigResourceType.CONFIG_RESOURCE_TYPE_TOPIC
BROKER = 2  # ConfigResourceType.CONFIG_RESOURCE_TYPE_BROKER


@dataclass(frozen=True)
class ConfigResource:
    """A resource with configs: `type` "topic" or "broker", `name` the topic's name, a broker's
    id (its throttle rates) or, for the cluster-wide defaults, "" (BROKER_DEFAULTS)."""

    type: str
    name: str


BROKER_DEFAULTS = ConfigResource("broker", "")


def resource_message(target: str | ConfigResource) -> c.ConfigResource:
    """The wire resource of a topic name or a ConfigResource; KafkaError (INVALID_REQUEST) for
    another type, before anything is sent."""

    if isinstance(target, str):
        return c.ConfigResource(type=TOPIC, name=target)  # type: ignore[arg-type]
    if isinstance(target, ConfigResource) and target.type in ("topic", "broker"):
        kind = TOPIC if target.type == "topic" else BROKER
        return c.ConfigResource(type=kind, name=target.name)  # type: ignore[arg-type]
    raise KafkaError(
        f"{target!r} is neither a topic name nor a ConfigResource('topic' or 'broker', name); "
        "use BROKER_DEFAULTS for the cluster-wide topic defaults",
        ErrorCode.INVALID_REQUEST,
    )


def resource_label(target: str | ConfigResource) -> str:
    """How errors name the resource: the topic's name, "broker 2", or "broker defaults"."""
    if isinstance(target, str):
        return target
    if target.type == "broker":
        return f"broker {target.name}" if target.name else "broker defaults"
    return target.name

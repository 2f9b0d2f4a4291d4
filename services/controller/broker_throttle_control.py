"""IncrementalAlterConfigs of one broker's own configs: the replication throttle rates (KIP-73,
metadata/replication_throttles.py). Pure.

The broker resource named by a broker id ("1") takes `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` only: every other broker setting is given on the broker's
command line, and topic defaults are cluster-wide (cluster_defaults_control.py). The id need not
be registered yet (Kafka sets a broker's dynamic configs before it starts, too). The records are
ConfigRecords of that resource; each broker reads its own from its image.
"""

from __future__ import annotations

from samsa.common.errors import ErrorCode, InvalidConfigError
from samsa.metadata.image import BROKER_RESOURCE, MetadataImage
from samsa.metadata.replication_throttles import INT_MAX, LONG_MAX, RATE_KEYS, parse_rate
from samsa.services.controller.config_alterations import altered, altered_twice, config_records
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


def broker_id_of(name: str) -> int | None:
    """The broker id a broker resource's name is (None: not a broker id)."""
    if name.isascii() and name.isdigit() and len(name) <= 10 and int(name) <= INT_MAX:
        return int(name)
    return None


def alter_broker_throttles(
    image: MetadataImage, resource: c.IncrementalAlterConfigsRequest.Resource
) -> list[m.MetadataRecord] | tuple[int, str]:
    """The records that store the alterations of broker `resource.name`'s throttle rates, or
    (error code, message)."""
    name = resource.resource.name
    if broker_id_of(name) is None or str(broker_id_of(name)) != name:
        return ErrorCode.INVALID_REQUEST, (
            f"broker resource {name[:40]!r} is neither '' (the cluster-wide topic defaults) nor "
            "a broker id such as '1' (its replication throttle rates)"
        )
    if (twice := altered_twice(resource.alterations)) is not None:
        return twice
    for alteration in resource.alterations:
        if alteration.name not in RATE_KEYS:
            return ErrorCode.INVALID_CONFIG, (
                f"{alteration.name[:100]!r} cannot be set per broker; a broker id takes "
                f"{', '.join(RATE_KEYS)} (other broker settings are given on its command line, "
                "topic defaults on the broker resource named '')"
            )
    current = dict(image.configs.get((BROKER_RESOURCE, name), {}))
    updated = altered(current, resource.alterations, lambda key: str(LONG_MAX), frozenset())
    if isinstance(updated, tuple):
        return updated
    try:
        for key, value in updated.items():
            parse_rate(key, value)
    except InvalidConfigError as error:
        return ErrorCode.INVALID_CONFIG, str(error)
    return config_records(BROKER_RESOURCE, name, current, updated)

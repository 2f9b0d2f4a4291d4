"""Goal: a broker holds the coordinator topics to no upper timestamp bound (KIP-937's
message.timestamp.after.max.ms), also when they were created before the controller set it for
them: their records carry the coordinator service's clock, maybe another host's, and an hour
of skew must not refuse every group commit. Other topics keep Kafka 4.0's one hour, and a value
set on a coordinator topic holds.

Method: partition_host.log_config on the configs the metadata carries.
"""

from __future__ import annotations

from samsa.metadata.coordinators import INTERNAL_TOPICS
from samsa.services.broker.log.config import HOUR_MS, LONG_MAX
from samsa.services.broker.partition_host import log_config

COMPACT = {"cleanup.policy": "compact"}


def test_the_coordinator_topics_take_any_future_time() -> None:
    for topic in sorted(INTERNAL_TOPICS):
        assert log_config(COMPACT, topic).message_timestamp_after_max_ms == LONG_MAX
        assert log_config(COMPACT, topic).compact


def test_other_topics_keep_the_default_and_a_set_value_holds() -> None:
    assert log_config(COMPACT, "orders").message_timestamp_after_max_ms == HOUR_MS
    topic = sorted(INTERNAL_TOPICS)[0]
    chosen = {"message.timestamp.after.max.ms": "5000"}
    assert log_config(chosen, topic).message_timestamp_after_max_ms == 5000

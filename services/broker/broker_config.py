"""BrokerConfig: every setting of a broker process, by its Kafka-style key (runtime/config.py
says how flags, SAMSA_* variables and a --config file become one)."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.common import limits
from samsa.services.broker.requests.answer_budget import ANSWER_COPIES
from samsa.services.runtime.config import integer, key, member_id, non_empty, text
from samsa.services.runtime.service_config import MemberConfig

HEARTBEAT_INTERVAL_MS_DEFAULT = 2000  # Kafka's broker.heartbeat.interval.ms
REPLICA_LAG_TIME_MAX_MS_DEFAULT = 30_000  # Kafka's replica.lag.time.max.ms
# The scrubber's own defaults (scrubber.py explains them; a unit test keeps the two equal).
SCRUB_BYTES_PER_SECOND_DEFAULT = 4 * 1024 * 1024
SCRUB_INTERVAL_MS_DEFAULT = 60 * 60 * 1000
LOG_CLEANER_BACKOFF_MS_DEFAULT = 15_000  # Kafka's log.cleaner.backoff.ms
# Kafka's log.retention.check.interval.ms is 5 minutes; a local cluster is checked more often.
LOG_RETENTION_CHECK_INTERVAL_MS_DEFAULT = 30_000
# Samsa's own (Kafka sends from the page cache and has quotas instead): the memory consumers'
# fetch answers may take at once, from their read until gRPC wrote them, each costing twice its
# bytes (requests/answer_budget.py, answer_gate.py). 512 MiB: four maximal answers; at least
# one, so that one can always proceed.
FETCH_ANSWERS_BYTES_MAX_DEFAULT = 8 * limits.fetch_response_bytes_max
FETCH_ANSWERS_BYTES_MAX_MIN = ANSWER_COPIES * limits.fetch_response_bytes_max
# An answer not written by then ends its fetch (requests/answer_write_deadline.py); at least a
# second, so that a test can lower it and no consumer is cut for a moment's stall.
FETCH_ANSWER_WRITE_TIMEOUT_MS_MIN = 1000


@dataclass(frozen=True, kw_only=True)
class BrokerConfig(MemberConfig):
    broker_id: int = key("broker.id", member_id, flags=["--broker-id"])
    log_dir: str = key("log.dir", non_empty, flags=["--data-dir"])
    rack: str = key("broker.rack", text, flags=["--rack"], default="")
    heartbeat_interval_ms: int = key(
        "broker.heartbeat.interval.ms", integer(10), default=HEARTBEAT_INTERVAL_MS_DEFAULT
    )
    replica_lag_time_max_ms: int = key(
        "replica.lag.time.max.ms", integer(100), default=REPLICA_LAG_TIME_MAX_MS_DEFAULT
    )
    log_scrub_bytes_per_second: int = key(
        "log.scrub.bytes.per.second",
        integer(0),
        default=SCRUB_BYTES_PER_SECOND_DEFAULT,
        help="re-check closed segments' CRCs at most this fast (0 disables the scrubber)",
    )
    log_scrub_interval_ms: int = key(
        "log.scrub.interval.ms",
        integer(0),
        default=SCRUB_INTERVAL_MS_DEFAULT,
        help="the shortest time between the starts of two scrub passes",
    )
    log_cleaner_backoff_ms: int = key(
        "log.cleaner.backoff.ms",
        integer(100),
        default=LOG_CLEANER_BACKOFF_MS_DEFAULT,
        help="the time between two compaction passes over the compacted topics' partitions",
    )
    log_retention_check_interval_ms: int = key(
        "log.retention.check.interval.ms",
        integer(100),
        default=LOG_RETENTION_CHECK_INTERVAL_MS_DEFAULT,
        help="the time between two retention passes (retention.ms, retention.bytes) over every "
        "partition",
    )
    fetch_answers_bytes_max: int = key(
        "fetch.answers.bytes.max",
        integer(FETCH_ANSWERS_BYTES_MAX_MIN),
        default=FETCH_ANSWERS_BYTES_MAX_DEFAULT,
        help="the memory consumers' fetch answers may take at once, read but not yet written "
        "(each costs twice its bytes; followers' are not counted); beyond it fetches answer "
        "smaller, or wait",
    )
    fetch_answer_write_timeout_ms: int = key(
        "fetch.answer.write.timeout.ms",
        integer(FETCH_ANSWER_WRITE_TIMEOUT_MS_MIN, limits.fetch_answer_write_ms_max),
        default=limits.fetch_answer_write_ms_max,
        help="the longest a consumer's fetch answer may wait for the client to read it; then "
        "its fetch or stream ends with CANCELLED and the answer's bytes are released",
    )

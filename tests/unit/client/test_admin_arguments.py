"""Goal: Admin refuses arguments it can tell are wrong before it sends anything, with the error
Kafka gives for them: what the wire cannot carry must not reach a server that would read it
otherwise.

Method: Admins whose bootstrap server refuses connections (127.0.0.1:1), so any request sent
would end in NoBrokersAvailable after request.timeout.ms; a refusal must come at once instead.
"""

from __future__ import annotations

import time

import pytest

from samsa.client.admin import Admin, NewTopic
from samsa.client.errors import NoBrokersAvailable, TopicError
from samsa.common.errors import ErrorCode, InvalidConfigError

REFUSED = "127.0.0.1:1"


def refused_admin() -> Admin:
    return Admin({"bootstrap.servers": REFUSED, "request.timeout.ms": 3_000})


def test_a_replication_factor_of_zero_is_refused_not_taken_as_the_default() -> None:
    """proto3 cannot tell 0 from unset, and the controller reads both as the cluster default;
    Kafka refuses 0 (INVALID_REPLICATION_FACTOR: larger than 0, or -1 for the default)."""
    with refused_admin() as admin:
        started = time.monotonic()
        with pytest.raises(TopicError, match=r"'orders'.*replication factor 0") as raised:
            admin.create_topics([NewTopic("fine", 1, -1), NewTopic("orders", 3, 0)])
        assert raised.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
        with pytest.raises(TopicError):
            admin.create_topic("orders", 3, replication_factor=0)
        assert time.monotonic() - started < 1.0, "refused before anything was sent"
        with pytest.raises(NoBrokersAvailable):
            admin.create_topic("orders", 3, replication_factor=-1)  # the default: sent


@pytest.mark.parametrize("servers", [" , ", ",", [""], "localhost", "host:0", "host:http", 9092])
def test_bootstrap_servers_without_a_host_port_address_are_refused_as_config(servers) -> None:  # type: ignore[no-untyped-def]
    """As the producer's and consumer's: a list of host:port; not an IndexError at the first
    write, nor 'no attempt was made' after request.timeout.ms."""
    with pytest.raises(InvalidConfigError, match=r"bootstrap\.servers"):
        Admin({"bootstrap.servers": servers})

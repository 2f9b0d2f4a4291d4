"""Goal: producers and consumers name themselves to brokers as Kafka's clients do, so that client
quotas can find them: a configured client.id as it is, else Kafka's defaults ("producer-N",
"consumer-<group>-N", N counting this process's clients), sent as the samsa-client-id metadata;
a client.id longer than limits.client_id_length_max is refused by the configuration.

Method: the identity helpers and the configuration parsers, called directly (no network).
"""

from __future__ import annotations

import re

import pytest

from samsa.client.client_identity import client_metadata, consumer_client_id, producer_client_id
from samsa.client.config import ConsumerConfig, ProducerConfig
from samsa.common import limits
from samsa.common.errors import InvalidConfigError
from samsa.metadata.client_quotas import CLIENT_ID_METADATA_KEY


def test_a_configured_client_id_is_kept() -> None:
    assert producer_client_id("slow") == "slow"
    assert consumer_client_id("reader", "g") == "reader"


def test_without_one_each_client_takes_kafkas_default_with_its_own_number() -> None:
    first, second = producer_client_id(""), producer_client_id("")
    assert re.fullmatch(r"producer-\d+", first) and first != second
    assert re.fullmatch(r"consumer-orders-\d+", consumer_client_id("", "orders"))
    assert re.fullmatch(r"consumer-\d+", consumer_client_id("", None))


def test_the_id_travels_as_call_metadata() -> None:
    assert client_metadata("slow") == ((CLIENT_ID_METADATA_KEY, "slow"),)
    assert CLIENT_ID_METADATA_KEY == "samsa-client-id"


@pytest.mark.parametrize("config_class", [ProducerConfig, ConsumerConfig])
def test_a_client_id_over_the_limit_is_refused(config_class: type) -> None:
    longest = "x" * limits.client_id_length_max
    config = config_class.from_dict({"bootstrap.servers": "h:1", "client.id": longest})
    assert config.client_id == longest
    with pytest.raises(InvalidConfigError, match=r"client\.id"):
        config_class.from_dict({"bootstrap.servers": "h:1", "client.id": longest + "x"})

"""Goal: a write's samsa.* options are checked on the driver, when the query is planned, with a
message naming the option, and not first in every task (each failing, each retried by Spark, a
worker's traceback for a typo). The exactly-once sink's producer is transactional, so what its
transactions need (idempotence, acks=all) is checked for it too, and the sink names its
transactions itself. Pure: no Spark session, no cluster."""

from __future__ import annotations

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from samsa.spark.options import OptionError
from samsa.spark.source import SamsaDataSource

BOOT = {"samsa.bootstrap.servers": "h:1", "topic": "t"}
SCHEMA = StructType([StructField("value", BinaryType())])


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"samsa.linger_ms": "5"}, "samsa.linger_ms.*did you mean 'linger.ms'"),
        ({"samsa.group.id": "g"}, "samsa.group.id.*consumer configuration"),
        ({"samsa.acks": "most"}, "samsa.acks"),
        ({"samsa.batch.size": "-1"}, "samsa.batch.size"),
        ({"samsa.transactional.id": "mine"}, "samsa.transactional.id"),
    ],
)
def test_bad_producer_options_are_refused_on_the_driver(options: dict, words: str) -> None:
    for stream in (False, True):
        source = SamsaDataSource(BOOT | options)
        with pytest.raises(OptionError, match=words):
            if stream:
                source.streamWriter(SCHEMA, False)
            else:
                source.writer(SCHEMA, False)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"samsa.acks": "1"}, "samsa.acks"),
        ({"samsa.enable.idempotence": "false"}, "samsa.enable.idempotence"),
    ],
)
def test_what_transactions_need_is_checked_for_the_exactly_once_sink(
    options: dict, words: str
) -> None:
    with pytest.raises(OptionError, match=words):
        SamsaDataSource(BOOT | options).streamWriter(SCHEMA, False)
    # the at-least-once sinks take them
    SamsaDataSource(BOOT | options).writer(SCHEMA, False)
    SamsaDataSource(BOOT | options | {"exactlyOnce": "false"}).streamWriter(SCHEMA, False)


def test_good_producer_options_pass() -> None:
    options = BOOT | {"samsa.linger.ms": "20", "samsa.transaction.timeout.ms": "600000"}
    SamsaDataSource(options).writer(SCHEMA, False)
    SamsaDataSource(options).streamWriter(SCHEMA, False)


def test_a_batch_write_refuses_to_promise_exactly_once() -> None:
    """exactlyOnce=true on df.write was taken and ignored: a batch write is at least once (a
    retried task writes its rows again)."""
    with pytest.raises(OptionError, match=r"exactlyOnce.*writeStream"):
        SamsaDataSource(BOOT | {"exactlyOnce": "true"}).writer(SCHEMA, False)
    SamsaDataSource(BOOT | {"exactlyOnce": "false"}).writer(SCHEMA, False)
    SamsaDataSource(BOOT | {"exactlyOnce": "true"}).streamWriter(SCHEMA, False)


def test_the_refusal_of_a_transactional_id_states_the_ids_the_sink_uses() -> None:
    """The refusal said the sink's ids were spark-<query id>-<batch id>-<task>: one id serves
    every micro-batch of a task (exactly_once.transactional_id), so a user looking for the
    transactions of batch 7 was sent after ids that do not exist."""
    from samsa.spark.exactly_once import transactional_id

    with pytest.raises(OptionError) as refused:
        SamsaDataSource(BOOT | {"samsa.transactional.id": "mine"}).streamWriter(SCHEMA, False)
    assert "(spark-<query id>-<task>)" in str(refused.value)
    assert transactional_id("q", 3) == "spark-q-3"


def test_the_sinks_admin_takes_the_client_id_and_request_timeout() -> None:
    """The exactly-once sink's Admin (its replay check and its commit of the tasks'
    transactions) gets the samsa.* keys an Admin shares with a producer, not only the bootstrap
    servers; the producer-only ones stay out (an Admin would refuse them)."""
    from samsa.spark.exactly_once import ExactlyOnceStreamWriter
    from samsa.spark.sink import WriteOptions

    client = {
        "bootstrap.servers": "h:1",
        "client.id": "etl",
        "request.timeout.ms": "5000",
        "linger.ms": "5",
    }
    writer = ExactlyOnceStreamWriter(WriteOptions(client, "out"))
    assert writer._admin_config() == {
        "bootstrap.servers": "h:1",
        "client.id": "etl",
        "request.timeout.ms": "5000",
    }

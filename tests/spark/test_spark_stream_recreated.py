"""Goal: a stream whose topic is deleted and created again under the same name while the query
is stopped never reads the new topic from the old topic's position: restarted from its
checkpoint, the query fails naming the topic and both ids and saying to set
failOnDataLoss=false (the default, true); restarted with failOnDataLoss=false it reads every
record of the new topic, from offset 0. Before the checkpoint recorded the topic's id, the
restart read the new topic from offset 8 (the old topic's end) and skipped its first 8 records
without a word: its end, 12, was past 8, so no end went back.

Method: a real local cluster (1 controller, 1 broker; stopped by PID also on failure) and a
real local Spark session (conftest.py). Each run of the query is Trigger.AvailableNow to a
Parquet sink with the same checkpoint; between the first run and the next the topic is deleted,
created again and written to with more records than the old topic had.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import FAST_SETTINGS, local_cluster, wait_until

from samsa.client import Admin, NewTopic, Producer

pytestmark = pytest.mark.timeout(300)

TOPIC = "spark-recreated"
OLD_RECORDS, NEW_RECORDS = 8, 12


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_cluster(tmp_path_factory.mktemp("spark-recreated"), 1, 1, FAST_SETTINGS) as cluster:
        yield cluster.spec.bootstrap_servers


def produce(bootstrap: str, prefix: bytes, count: int) -> None:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        for n in range(count):
            producer.send(TOPIC, b"%s-%d" % (prefix, n), partition=0).result(timeout=60)


def run(spark, bootstrap: str, out: str, checkpoint: str, fail_on_data_loss: bool) -> None:  # type: ignore[no-untyped-def]
    """One AvailableNow run of the query from `checkpoint`; raises what failed it."""
    query = (
        spark.readStream.format("samsa")
        .option("samsa.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
        .load()
        .select("offset", "value")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the AvailableNow run did not finish"
    finally:
        query.stop()


def checkpointed(checkpoint: Path) -> dict:
    """The source offset of the last batch in the offset log, checked to be canonical JSON."""
    logged = max((checkpoint / "offsets").glob("[0-9]*"), key=lambda path: int(path.name))
    text = logged.read_text().splitlines()[-1]
    assert text == json.dumps(json.loads(text), sort_keys=True), "canonical: keys sorted"
    return json.loads(text)


def test_a_topic_recreated_while_the_query_stopped_fails_it_or_is_read_from_0(
    spark,  # type: ignore[no-untyped-def]
    bootstrap: str,
    tmp_path: Path,
) -> None:
    from pyspark.errors import StreamingQueryException

    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        old_id = admin.describe_topics([TOPIC])[TOPIC].topic_id
        produce(bootstrap, b"old", OLD_RECORDS)
        run(spark, bootstrap, out, checkpoint, fail_on_data_loss=True)
        assert spark.read.parquet(out).count() == OLD_RECORDS
        assert checkpointed(tmp_path / "checkpoint") == {
            "$topicIds": {TOPIC: old_id.hex()},
            TOPIC: {"0": OLD_RECORDS},
        }

        admin.delete_topics([TOPIC])
        wait_until("the deletion", lambda: TOPIC not in admin.list_topics())
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        new_id = admin.describe_topics([TOPIC])[TOPIC].topic_id
    assert new_id != old_id
    produce(bootstrap, b"new", NEW_RECORDS)

    with pytest.raises(StreamingQueryException) as failed:
        run(spark, bootstrap, out, checkpoint, fail_on_data_loss=True)
    message = str(failed.value)
    assert f"topic {TOPIC} was deleted and created again" in message, message
    assert f"its id was {old_id.hex()}, it is {new_id.hex()} now" in message, message
    assert "set failOnDataLoss=false" in message, message
    assert spark.read.parquet(out).count() == OLD_RECORDS, "nothing read by the failed run"

    run(spark, bootstrap, out, checkpoint, fail_on_data_loss=False)
    rows = sorted((bytes(r.value), r.offset) for r in spark.read.parquet(out).collect())
    assert rows == sorted(
        [(b"old-%d" % n, n) for n in range(OLD_RECORDS)]
        + [(b"new-%d" % n, n) for n in range(NEW_RECORDS)]
    ), "every record of the new topic, from offset 0, and none twice"
    assert checkpointed(tmp_path / "checkpoint") == {
        "$topicIds": {TOPIC: new_id.hex()},
        TOPIC: {"0": NEW_RECORDS},
    }

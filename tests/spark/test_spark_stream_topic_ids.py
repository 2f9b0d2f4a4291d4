"""Goal: a stream's checkpointed offsets record each topic's id (KIP-516) beside its positions,
in canonical JSON, and an offset checkpointed before they did still reads; a topic deleted and
created again under the same name between two micro-batches is data loss: the stream stops
naming the topic and both ids (failOnDataLoss), or, with failOnDataLoss=false, reads the new
topic from its first offset, never from the old topic's position (which skipped the new
topic's records below it, or waited past its end); and each range is read under the id the
plan saw, so a topic re-created while a micro-batch is planned or read is caught by the task.

Method: stream_offsets' pure functions directly, and SamsaStreamReader over a stand-in cluster
(its partitions, their bounds and the topics' ids, which a test changes as a deletion and
re-creation would). Pure: no Spark session, no cluster."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from samsa.spark import source, stream_source
from samsa.spark import stream_offsets as so
from samsa.spark.options import OptionError, parse_options
from samsa.spark.source import RangePartition
from samsa.spark.stream_source import SamsaStreamReader

BOOT = {"samsa.bootstrap.servers": "h:1", "subscribe": "t"}
OLD, NEW = bytes(range(16)), bytes(range(16, 32))


def test_offsets_record_the_ids_in_canonical_json_and_round_trip() -> None:
    positions = {("t", 10): 5, ("t", 9): 1, ("a", 0): 3}
    offset = so.to_offset(positions, {"t": NEW, "a": OLD, "unread": OLD})
    assert offset == {
        "$topicIds": {"a": OLD.hex(), "t": NEW.hex()},  # only the topics the positions name
        "a": {"0": 3},
        "t": {"10": 5, "9": 1},
    }
    assert json.dumps(offset) == json.dumps(offset, sort_keys=True), "canonical: key order"
    assert json.dumps(so.to_offset(dict(reversed(positions.items())), {"a": OLD, "t": NEW})) == (
        json.dumps(offset)
    )
    assert so.from_offset(offset) == positions
    assert so.ids_of(offset) == {"a": OLD, "t": NEW}
    assert so.ids_of(json.loads(json.dumps(offset))) == {"a": OLD, "t": NEW}


def test_an_offset_checkpointed_without_ids_reads_as_before() -> None:
    """Checkpoints written before the ids were recorded: the same positions, no ids, so no
    topic of theirs is ever found re-created; a topic with no id is recorded without one."""
    old_format = {"t": {"0": 8, "1": 2}}
    assert so.from_offset(old_format) == {("t", 0): 8, ("t", 1): 2}
    assert so.ids_of(old_format) == {}
    assert so.to_offset(so.from_offset(old_format)) == old_format
    assert so.to_offset({("t", 0): 8}, {"t": b""}) == {"t": {"0": 8}}
    assert so.recreated(so.ids_of(old_format), {"t": NEW}) == {}
    assert so.from_offset(so.INITIAL) == {}


def test_an_offset_copied_from_a_checkpoint_is_taken_as_startingoffsets() -> None:
    """A query's progress and checkpoint show offsets with their ids: pasted into
    startingOffsets (as Kafka's users restart from a printed endOffset), the positions are
    taken; the ids were refused as a topic that is not subscribed."""
    copied = json.dumps(so.to_offset({("t", 0): 5, ("t", 1): 7}, {"t": NEW}))
    assert "$topicIds" in copied
    options = parse_options(BOOT | {"startingOffsets": copied, "endingOffsets": copied})
    assert options.starting == {"t": {0: 5, 1: 7}}
    assert options.ending == {"t": {0: 5, 1: 7}}


def test_only_a_topic_whose_id_changed_is_recreated() -> None:
    before = {"same": OLD, "again": OLD, "deleted": OLD}
    now = {"same": OLD, "again": NEW, "new": NEW}
    assert so.recreated(before, now) == {"again": (OLD, NEW)}
    assert so.without_topics({("again", 0): 4, ("same", 0): 2}, {"again"}) == {("same", 0): 2}


class Cluster:
    """Topic t, one partition: its bounds and id now, as a test sets them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.first, self.end, self.id = 0, 12, NEW
        self.recreate_on_bounds = False  # re-created right after its offsets are read
        monkeypatch.setattr(
            stream_source, "subscribed_partitions", lambda o, missing_ok=False: [("t", 0)]
        )
        monkeypatch.setattr(stream_source, "partition_bounds", self.bounds)
        monkeypatch.setattr(source, "topic_ids", lambda o, topics: {"t": self.id})

    def bounds(self, options: object, tps: list) -> tuple[dict, dict]:
        answer = {tp: self.first for tp in tps}, {tp: self.end for tp in tps}
        if self.recreate_on_bounds:
            self.id = NEW
        return answer


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return Cluster(monkeypatch)


def reader(lenient: bool = False) -> SamsaStreamReader:
    return SamsaStreamReader(parse_options(BOOT | {"failOnDataLoss": str(not lenient).lower()}))


def ranges(tasks: list) -> list[tuple[int, int, bytes]]:
    assert all(isinstance(t, RangePartition) for t in tasks)
    return [(t.start, t.end, t.topic_id) for t in tasks]


# Read to 8 in the topic whose id was OLD; now t is another topic, NEW, of 12 records.
START = {"$topicIds": {"t": OLD.hex()}, "t": {"0": 8}}


def test_a_recreated_topic_stops_the_stream_naming_it_and_both_ids(cluster: Cluster) -> None:
    """Read on from 8, the new topic's records 0..7 were skipped without a word (its end, 12,
    is past 8: no end went back); now it is an error saying what to set to go on."""
    with pytest.raises(OptionError) as raised:
        reader().latestOffset(START, ReadAllAvailable())
    message = str(raised.value)
    assert "topic t was deleted and created again" in message
    assert f"its id was {OLD.hex()}, it is {NEW.hex()} now" in message
    assert "set failOnDataLoss=false to read the new topic from its first offset" in message


@pytest.mark.parametrize("new_end", [12, 3], ids=["longer", "shorter"])
def test_without_failondataloss_the_recreated_topic_is_read_from_its_first_offset(
    cluster: Cluster, new_end: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The new topic is read as a new partition is, from its first offset, under its own id,
    also when it is shorter than the old position (it was read on from its end: 0..2 lost)."""
    cluster.end = new_end
    lenient = reader(lenient=True)
    end = lenient.latestOffset(START, ReadAllAvailable())
    assert end == {"$topicIds": {"t": NEW.hex()}, "t": {"0": new_end}}
    assert ranges(lenient.partitions(START, end)) == [(0, new_end, NEW)]
    assert "topic t was deleted and created again" in caplog.text


def test_an_unchanged_id_reads_on_and_a_checkpoint_without_ids_behaves_as_before(
    cluster: Cluster,
) -> None:
    """The same id: the stream reads on from 8; an end below it is still an end gone back. An
    offset without ids reads on from 8 as it did (nothing to compare), and records them."""
    same = {"$topicIds": {"t": NEW.hex()}, "t": {"0": 8}}
    strict = reader()
    end = strict.latestOffset(same, ReadAllAvailable())
    assert end == {"$topicIds": {"t": NEW.hex()}, "t": {"0": 12}}
    assert ranges(strict.partitions(same, end)) == [(8, 12, NEW)]
    assert strict.latestOffset(end, ReadAllAvailable()) == end, "nothing new: the same offset"
    assert reader().latestOffset({"t": {"0": 8}}, ReadAllAvailable()) == end
    cluster.end = 5
    with pytest.raises(OptionError, match="t-0: its end offset went back from 8 to 5"):
        strict.latestOffset(same, ReadAllAvailable())


def test_ranges_are_read_under_the_id_the_plan_saw(cluster: Cluster) -> None:
    """The ids are asked before the offsets, and the tasks carry the ids of the end offset, not
    the ids at planning: a topic re-created while the micro-batch is planned (or replayed after
    a restart) has the old topic's offsets read under the old id, and the task fails or ends
    (read_range) rather than read the new topic's records at them."""
    cluster.id, cluster.recreate_on_bounds = OLD, True
    same = {"$topicIds": {"t": OLD.hex()}, "t": {"0": 8}}
    end = reader().latestOffset(same, ReadAllAvailable())
    assert end == {"$topicIds": {"t": OLD.hex()}, "t": {"0": 12}}
    assert cluster.id == NEW
    assert ranges(reader().partitions(same, end)) == [(8, 12, OLD)]
    with pytest.raises(OptionError, match=f"its id was {OLD.hex()}, it is {NEW.hex()} now"):
        reader().latestOffset(end, ReadAllAvailable())


def test_available_now_does_not_cap_a_new_topic_at_the_old_ones_end(cluster: Cluster) -> None:
    """Trigger.AvailableNow stops at the ends seen when it started: a topic re-created since is
    new since, and waits for the next run, as a new partition does; its old end is not the new
    topic's."""
    cluster.id = OLD
    lenient = reader(lenient=True)
    lenient.prepareForTriggerAvailableNow()
    cluster.id, cluster.end = NEW, 30
    end = lenient.latestOffset(START, ReadAllAvailable())
    assert end == {"$topicIds": {"t": NEW.hex()}, "t": {"0": 0}}

"""Goal: the source's options parse as Spark's Kafka connector's do, and every mistake is refused
with a message naming the option; offsets resolve to the right [start, end) per partition (-2/-1,
data loss refused or skipped as failOnDataLoss says) and split into at least minPartitions tasks
covering exactly the same offsets. Pure: no Spark session, no cluster."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.spark.options import OptionError, canonical, parse_options
from samsa.spark.ranges import OffsetRange, resolve, split

BOOT = {"samsa.bootstrap.servers": "h:1"}


def test_subscribe_and_defaults() -> None:
    parsed = parse_options(BOOT | {"subscribe": "a, b", "samsa.client.id": "x"})
    assert parsed.subscribe == ("a", "b") and parsed.client == {
        "bootstrap.servers": "h:1",
        "client.id": "x",
    }
    assert (parsed.starting, parsed.ending, parsed.isolation) == (
        "earliest",
        "latest",
        "read_committed",
    )
    assert parsed.matches("a") and not parsed.matches("c")
    assert parse_options(BOOT | {"subscribePattern": "ev.*"}).matches("events")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"subscribe": "a"}, "samsa.bootstrap.servers"),
        (BOOT, "exactly one of subscribe"),
        (BOOT | {"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of subscribe"),
        (BOOT | {"assign": "[0]"}, "assign must map"),
        (BOOT | {"subscribePattern": "("}, "is not a regex"),
        (BOOT | {"subscribe": "a", "startingOffsets": "soon"}, "startingOffsets must be"),
        (BOOT | {"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets cannot"),
        (BOOT | {"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "below -2"),
        (BOOT | {"subscribe": "a", "includeHeaders": "yes"}, "includeHeaders must be"),
        (BOOT | {"subscribe": "a", "isolation.level": "dirty"}, "isolation.level"),
        (BOOT | {"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
    ],
)
def test_mistakes_are_refused_naming_the_option(options: dict, words: str) -> None:
    with pytest.raises(OptionError, match=words):
        parse_options(options)


def test_offsets_json_is_canonical() -> None:
    assert canonical({"b": {1: 5, 0: 3}, "a": {0: 1}}) == '{"a":{"0":1},"b":{"0":3,"1":5}}'


def test_resolve_ranges_and_data_loss() -> None:
    tps = [("t", 0), ("t", 1)]
    first, last = {("t", 0): 10, ("t", 1): 0}, {("t", 0): 50, ("t", 1): 7}
    got = resolve(tps, {"t": {0: -2, 1: 3}}, {"t": {0: 40, 1: -1}}, first, last, True)
    assert got == [OffsetRange("t", 0, 10, 40), OffsetRange("t", 1, 3, 7)]
    with pytest.raises(OptionError, match="failOnDataLoss"):
        resolve(tps, {"t": {0: 2, 1: 0}}, "latest", first, last, True)
    skipped = resolve(tps, {"t": {0: 2, 1: 0}}, "latest", first, last, False)
    assert skipped[0] == OffsetRange("t", 0, 10, 50)
    with pytest.raises(OptionError, match="names no offset"):
        resolve(tps, {"t": {0: 1}}, "latest", first, last, False)


@given(st.lists(st.integers(0, 500), min_size=1, max_size=5), st.integers(1, 20))
def test_split_covers_the_same_offsets_in_enough_tasks(sizes: list[int], wanted: int) -> None:
    ranges = [OffsetRange("t", p, 100, 100 + size) for p, size in enumerate(sizes)]
    pieces = split(ranges, wanted)
    covered = sorted((r.partition, o) for r in pieces for o in range(r.start, r.end))
    assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert all(r.size for r in pieces), "no empty task"
    assert len(pieces) >= min(wanted, sum(sizes))

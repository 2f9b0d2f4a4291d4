"""Goal: `samsa topics delete A B` and `samsa topics delete-records` say what became of each
topic or partition. The controller deletes the
topics it can even when it refuses another (an unknown name), so a deleted one is named on
stdout and each refused one gets its line on stderr (exit status 1); before, the one error line
hid that A was deleted. Likewise the leaders delete the records of the partitions they accept
when another is refused: those partitions' low watermarks are shown (their log start, asked
anew) beside the refusals. A request that failed as a whole is left to `run`'s error line.

Method: commands.delete_topics and topic_changes.delete_records over stand-in Admins that
answer as Admin does (TopicError carrying every refused item in `errors`); the commands against
a cluster are in tests/integration/test_cli_commands.py.
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from samsa.cli.commands import delete_topics
from samsa.cli.topic_changes import delete_records
from samsa.client import TopicError
from samsa.client.errors import first_of
from samsa.common.errors import ErrorCode


class StandInAdmin:
    def __init__(self, existing: set[str], whole_failure: TopicError | None = None) -> None:
        self.existing = existing
        self.whole_failure = whole_failure
        self.asked: list[str] = []

    def delete_topics(self, names: list[str]) -> None:
        self.asked = list(names)
        if self.whole_failure is not None:
            raise self.whole_failure
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        refused = {n: TopicError(f"topic {n!r} does not exist", unknown) for n in names}
        error = first_of({n: e for n, e in refused.items() if n not in self.existing})
        self.existing -= set(names)
        if error is not None:
            raise error


def test_the_deleted_topics_are_named_beside_the_refused_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = StandInAdmin({"a", "c"})
    assert delete_topics(admin, ["a", "nope", "c", "a", "gone"]) == 1  # type: ignore[arg-type]
    assert admin.asked == ["a", "nope", "c", "gone"]
    out, err = capsys.readouterr()
    assert out == "deleted a, c\n"
    assert err.splitlines() == [
        f"samsa topics: topic {name!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)"
        for name in ("nope", "gone")
    ]


def test_all_deleted_is_one_line_and_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert delete_topics(StandInAdmin({"a", "b"}), ["a", "b"]) == 0  # type: ignore[arg-type]
    assert capsys.readouterr() == ("deleted a, b\n", "")


def test_a_request_that_failed_whole_is_raised_for_runs_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failure = TopicError("the controller timed out", ErrorCode.REQUEST_TIMED_OUT)
    with pytest.raises(TopicError, match="timed out"):
        delete_topics(StandInAdmin({"a"}, failure), ["a"])  # type: ignore[arg-type]
    assert capsys.readouterr().out == ""


class RecordsAdmin:
    """Topic t of three partitions whose high watermarks are `ends`."""

    def __init__(self, ends: list[int]) -> None:
        self.ends = ends
        self.starts = [0] * len(ends)

    def describe_topics(self, names: list[str]) -> dict[str, SimpleNamespace]:
        partitions = [SimpleNamespace(partition=p) for p in range(len(self.ends))]
        return {"t": SimpleNamespace(partitions=partitions)}

    def delete_records(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        refused = {}
        for (topic, p), offset in offsets.items():
            if offset > self.ends[p]:
                refused[(topic, p)] = TopicError(
                    f"{topic}-{p}: offset {offset} is past the high watermark",
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                )
            else:
                self.starts[p] = max(self.starts[p], offset)
        if error := first_of(refused):
            raise error
        return {key: self.starts[key[1]] for key in offsets}

    def list_offsets(self, specs: dict[tuple[str, int], str]) -> dict[tuple[str, int], object]:
        assert set(specs.values()) == {"earliest"}
        return {key: SimpleNamespace(offset=self.starts[key[1]]) for key in specs}


def records_args(*partitions: int) -> argparse.Namespace:
    return argparse.Namespace(name="t", offset="40", partition=list(partitions))


def test_the_partitions_whose_records_went_are_shown_beside_the_refused_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = RecordsAdmin([50, 10, 45])
    assert delete_records(admin, records_args()) == 1  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert [line.split() for line in out.splitlines()] == [
        ["partition", "low", "watermark"],
        ["0", "40"],
        ["2", "40"],
    ]
    assert err == (
        "samsa topics delete-records: t-1: offset 40 is past the high watermark "
        "(OFFSET_OUT_OF_RANGE)\n"
    )
    assert admin.starts == [40, 0, 40]


def test_every_partition_refused_prints_no_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert delete_records(RecordsAdmin([10, 10, 10]), records_args(1)) == 1  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert out == "" and err.count("OFFSET_OUT_OF_RANGE") == 1

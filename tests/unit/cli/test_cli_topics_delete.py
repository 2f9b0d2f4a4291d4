"""Goal: `samsa topics delete A B` says what became of each topic. The controller deletes the
topics it can even when it refuses another (an unknown name), so a deleted one is named on
stdout and each refused one gets its line on stderr (exit status 1); before, the one error line
hid that A was deleted. A request that failed as a whole is left to `run`'s error line.

Method: commands.delete_topics over a stand-in Admin that answers as Admin.delete_topics does
(TopicError carrying every refused topic in `errors`); the command against a cluster is in
tests/integration/test_cli_commands.py.
"""

from __future__ import annotations

import pytest

from samsa.cli.commands import delete_topics
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

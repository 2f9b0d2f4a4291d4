"""Goal: every cluster command's usage error (one its parser cannot see) is one line on stderr
in that command's form, exit 2, before any cluster is asked: `samsa groups reset-offsets: ...`
and `samsa transactions find-hanging: ...` (their checks name the subcommand), `samsa topics
create: ...` (the action), `samsa leader-election: ...` (the others). commands.run() keeps the
checks in one table, USAGE_CHECKS; this pins what each kind prints.

Method: `samsa` main() with a bootstrap server nobody listens on (a usage error must come
before connecting), capturing stderr.
"""

from __future__ import annotations

import pytest

from samsa.cli.main import main as samsa_main

NOBODY = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["groups", "reset-offsets", "--to-earliest", *NOBODY],
            "samsa groups reset-offsets: no group given; name one: samsa groups reset-offsets "
            "GROUP (or --group GROUP)",
        ),
        (
            ["transactions", "find-hanging", "--broker-id", "1", "--partition", "0", *NOBODY],
            "samsa transactions find-hanging: --partition goes with --topic",
        ),
        (
            ["topics", "create", "t", "--partitions", "2", "--replica-assignment", "1", *NOBODY],
            "samsa topics create: --partitions cannot be used with --replica-assignment, which "
            "sets the partitions and their replicas: leave them out",
        ),
        (
            [
                "leader-election",
                "--election-type",
                "preferred",
                "--all-topic-partitions",
                "--partition",
                "1",
                *NOBODY,
            ],
            "samsa leader-election: --partition goes with --topic",
        ),
    ],
)
def test_a_usage_error_is_one_line_in_the_commands_form_before_connecting(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samsa_main(argv) == 2
    assert capsys.readouterr().err == line + "\n"

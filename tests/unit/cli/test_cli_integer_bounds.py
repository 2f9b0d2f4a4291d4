"""Goal: a number the wire cannot carry (partitions, broker ids and epochs are int32; offsets and
producer ids int64) is a usage error naming the flag, before anything connects; it used to pass
argparse and end in protobuf's `ValueError: Value out of range` traceback.

Method: the real argparse tree of `samsa`; a parse error is SystemExit(2) with argparse's message.
"""

from __future__ import annotations

import argparse

import pytest

from samsa.cli.command_support import parse_offsets_csv
from samsa.cli.commands import add_commands
from samsa.cli.topic_changes import records_offset

TOO_BIG_64 = str(2**63)
TOO_BIG_32 = str(2**31)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "flag", "bits"),
    [
        (["topics", "create", "t", "--partitions", TOO_BIG_32], "--partitions", 32),
        (["topics", "create", "t", "--replication-factor", TOO_BIG_32], "--replication-factor", 32),
        (["topics", "alter", "t", "--partitions", TOO_BIG_32], "--partitions", 32),
        (["topics", "offsets", "t", "--partition", TOO_BIG_32], "--partition", 32),
        (["consume", "t", "--offset", TOO_BIG_64], "--offset", 64),
        (["consume", "t", "--partition", TOO_BIG_32], "--partition", 32),
        (["produce", "t", "--partition", TOO_BIG_32], "--partition", 32),
        (["transactions", "find-hanging", "--broker-id", TOO_BIG_32], "--broker-id", 32),
        (["transactions", "list", "--producer-id", TOO_BIG_64], "--producer-id", 64),
    ],
)
def test_a_number_too_large_for_the_wire_is_a_usage_error(
    argv: list[str], flag: str, bits: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2
    assert f"argument {flag}" in (err := capsys.readouterr().err)
    assert f"does not fit a {bits}-bit field" in err


def test_the_largest_numbers_the_wire_carries_still_parse() -> None:
    assert parse("consume", "t", "--offset", str(2**63 - 1)).offset == 2**63 - 1
    assert parse("consume", "t", "--offset", str(-(2**63))).offset == -(2**63)
    assert parse("produce", "t", "--partition", str(2**31 - 1)).partition == 2**31 - 1


def test_a_word_is_named_as_not_an_integer(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("transactions", "find-hanging", "--broker-id", "one")
    assert "argument --broker-id: 'one' is not an integer" in capsys.readouterr().err


def test_offsets_read_from_text_are_bounded_too() -> None:
    with pytest.raises(SystemExit, match="must be an offset"):
        records_offset(TOO_BIG_64)
    assert records_offset(str(2**63 - 1)) == 2**63 - 1
    with pytest.raises(SystemExit, match="line 1"):
        parse_offsets_csv(f"t,0,{TOO_BIG_64}", "offsets.csv")
    with pytest.raises(SystemExit, match="line 1"):
        parse_offsets_csv(f"t,{TOO_BIG_32},0", "offsets.csv")

"""Goal: `samsa transactions find-hanging` parses as kafka-transactions.sh's does (one scope:
--topic, optionally with --partition, or --broker-id; --max-transaction-timeout in minutes,
15 by default), refuses a malformed scope (and `list` an unknown --state) before connecting
(exit 2), and prints a table that
says what `samsa transactions abort` needs for each transaction found.

Method: the real argparse tree of `samsa` and the pure `hanging_lines`, on hand-made
OpenTransactions; nothing connects to a cluster (the end-to-end run is in
tests/integration/test_hanging_transaction.py).
"""

from __future__ import annotations

import argparse

import pytest

from samsa.cli.commands import add_commands, run
from samsa.cli.transaction_commands import hanging_lines
from samsa.client.transaction_admin import OpenTransaction

NOBODY = ("--bootstrap-server", "127.0.0.1:1")  # nothing listens there: never reached


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def test_the_scope_and_the_timeout_parse() -> None:
    args = parse("transactions", "find-hanging", "--topic", "out", "--partition", "2")
    assert (args.topic, args.partition, args.broker_id) == ("out", 2, None)
    assert args.max_transaction_timeout == 15  # minutes, Kafka's default
    args = parse(
        "transactions", "find-hanging", "--broker-id", "3", "--max-transaction-timeout", "0.5"
    )
    assert (args.topic, args.broker_id, args.max_transaction_timeout) == (None, 3, 0.5)


@pytest.mark.parametrize(
    "argv",
    [
        (),  # a scope is required
        ("--topic", "out", "--broker-id", "1"),  # only one
    ],
)
def test_argparse_refuses_no_scope_or_two(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("transactions", "find-hanging", *argv)
    assert exited.value.code == 2


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--broker-id", "1", "--partition", "0"), "--partition goes with --topic"),
        (("--topic", "out", "--partition", "-1"), "partitions are numbers from 0"),
        (("--topic", "out", "--max-transaction-timeout", "0"), "more than 0 minutes"),
        (("--topic", "out", "--max-transaction-timeout", "inf"), "a finite number of minutes"),
    ],
)
def test_a_malformed_scope_is_a_usage_error_before_connecting(
    argv: tuple[str, ...], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(parse("transactions", "find-hanging", *argv, *NOBODY)) == 2
    assert says in capsys.readouterr().err


def test_an_unknown_state_to_list_is_a_usage_error_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(parse("transactions", "list", "--state", "open", *NOBODY)) == 2
    err = capsys.readouterr().err
    assert "unknown state 'open'" in err and "Ongoing" in err


def test_the_table_says_what_abort_takes() -> None:
    found = [
        OpenTransaction("out", 0, 4001, 7, 120, 1_800_000),
        OpenTransaction("out", 3, 4002, 0, 9, 1_200_000),
    ]
    lines = hanging_lines(found).splitlines()
    assert lines[0].split() == [
        "topic", "partition", "producer", "id", "epoch", "start", "offset", "silent", "(min)"
    ]  # fmt: skip
    assert lines[1].split() == ["out", "0", "4001", "7", "120", "30.0"]
    assert lines[2].split() == ["out", "3", "4002", "0", "9", "20.0"]
    assert lines[-1] == "(e.g. --topic out --partition 0 --producer-id 4001 --producer-epoch 7)"
    assert hanging_lines([]) == "no hanging transactions"

"""Goal: `samsa perf produce` turns transactions on as kafka-producer-perf-test.sh does: for
--transactional-id, for --transaction-duration-ms, or for a transactional.id among the producer
properties (the flag wins), with Kafka's defaults for what was not given; and off otherwise.

Method: the pure `transactions_of` and the real argparse tree; the end-to-end run is in
tests/integration/test_cli_perf.py.
"""

from __future__ import annotations

import argparse

import pytest

from samsa.cli.commands import add_commands
from samsa.cli.perf_commands import (
    DEFAULT_TRANSACTION_DURATION_MS,
    DEFAULT_TRANSACTIONAL_ID,
    transactions_of,
)


@pytest.mark.parametrize(
    ("flag_id", "duration_ms", "settings", "expected"),
    [
        (None, None, {}, (None, 0)),  # no transactions
        ("app", None, {}, ("app", DEFAULT_TRANSACTION_DURATION_MS)),
        (None, 250, {}, (DEFAULT_TRANSACTIONAL_ID, 250)),
        (None, None, {"transactional.id": "props"}, ("props", DEFAULT_TRANSACTION_DURATION_MS)),
        ("flag", 50, {"transactional.id": "props"}, ("flag", 50)),
    ],
)
def test_transactions_are_on_when_any_of_the_three_asks(
    flag_id: str | None, duration_ms: int | None, settings: dict, expected: tuple
) -> None:
    assert transactions_of(flag_id, duration_ms, settings) == expected


def test_the_flags_parse() -> None:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    base = ["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1"]
    args = parser.parse_args(base)
    assert (args.transactional_id, args.transaction_duration_ms) == (None, None)
    args = parser.parse_args([*base, "--transactional-id", "x", "--transaction-duration-ms", "9"])
    assert (args.transactional_id, args.transaction_duration_ms) == ("x", 9)
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--transaction-duration-ms", "0"])

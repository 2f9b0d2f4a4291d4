"""Goal: `samsa perf produce` turns transactions on as kafka-producer-perf-test.sh does: for
--transactional-id, for --transaction-duration-ms, or for a transactional.id among the producer
properties (the flag wins), with Kafka's defaults for what was not given; and off otherwise.
A record refused in the middle of a transaction (send() raising once the transaction failed)
aborts the open transaction and exits 1, as a failed commit does: the transaction is not left
open, holding the partitions' last stable offset back until its timeout.

Method: the pure `transactions_of` and the real argparse tree; the produce loop with a fake
Producer that refuses its third record (no cluster); the end-to-end run is in
tests/integration/test_cli_perf.py.
"""

from __future__ import annotations

import argparse
from typing import ClassVar

import pytest

from samsa.cli import perf_commands
from samsa.cli.commands import add_commands
from samsa.cli.perf_commands import (
    DEFAULT_TRANSACTION_DURATION_MS,
    DEFAULT_TRANSACTIONAL_ID,
    transactions_of,
)
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode


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


class RefusingProducer:
    """A transactional Producer whose third send() raises as the real one does once a record
    of the open transaction failed (TransactionManager.check_send in ABORTABLE_ERROR)."""

    calls: ClassVar[list[str]] = []

    def __init__(self, settings: dict) -> None:
        assert settings["transactional.id"] == "perf-app"
        self.failed_records = 0
        self._sent = 0

    def __enter__(self) -> RefusingProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.calls.append("close")

    def init_transactions(self) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def send(self, topic: str, value: bytes) -> object:
        self._sent += 1
        if self._sent == 3:
            raise KafkaError(
                "the transaction failed (perf-0: MESSAGE_TOO_LARGE): call abort_transaction()",
                ErrorCode.MESSAGE_TOO_LARGE,
            )
        self.calls.append("send")
        return object()  # never measured: --latency-every is larger than the run

    def commit_transaction(self) -> None:
        self.calls.append("commit")

    def abort_transaction(self) -> None:
        self.calls.append("abort")


class NoAdmin:
    def __init__(self, settings: dict) -> None:
        pass

    def __enter__(self) -> NoAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_record_refused_mid_transaction_aborts_it_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(perf_commands, "Admin", NoAdmin)
    monkeypatch.setattr(perf_commands, "require_topic", lambda admin, topic: None)
    monkeypatch.setattr(perf_commands, "Producer", RefusingProducer)
    RefusingProducer.calls = []
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    run = ["perf", "produce", "--topic", "perf", "--num-records", "10", "--record-size", "1"]
    flags = ["--latency-every", "100", "--transactional-id", "perf-app"]
    args = parser.parse_args([*run, *flags, "--bootstrap-server", "127.0.0.1:1"])
    assert perf_commands.run_perf(args) == 1
    assert RefusingProducer.calls == ["init", "begin", "send", "send", "abort", "close"]
    err = capsys.readouterr().err
    assert "samsa perf produce: a transaction failed and was aborted" in err
    assert "MESSAGE_TOO_LARGE" in err

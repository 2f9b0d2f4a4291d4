"""Goal: `samsa produce < file` holds memory for the records in flight, not for every line of
the input: a file of a hundred million lines must not keep a hundred million record futures
alive until the end. It still counts the records that failed and shows the first error.

Method: `_produce` with stdin a stream of lines and a fake Producer whose sends are acknowledged
at once (or fail, for some), counting the record futures alive after each send.
"""

from __future__ import annotations

import argparse
import io
import sys
import weakref
from types import SimpleNamespace
from typing import Any

import pytest

from samsa.cli import console_commands
from samsa.cli.console_format import LineFormat
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode


class SettledFuture:
    """A record already acknowledged (error None) or failed."""

    def __init__(self, error: KafkaError | None) -> None:
        self.error = error

    def done(self) -> bool:
        return True

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        return self.error


class FakeProducer:
    def __init__(self, fail_every: int = 0) -> None:
        self.fail_every = fail_every
        self.sent = 0
        self.alive: weakref.WeakSet[SettledFuture] = weakref.WeakSet()
        self.most_alive = 0

    def __enter__(self) -> FakeProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def send(self, topic: str, value: bytes, **_: Any) -> SettledFuture:
        self.most_alive = max(self.most_alive, len(self.alive))
        self.sent += 1
        failed = self.fail_every and self.sent % self.fail_every == 0
        error = KafkaError("record too large", ErrorCode.MESSAGE_TOO_LARGE) if failed else None
        future = SettledFuture(error)
        self.alive.add(future)
        return future

    def flush(self) -> None:
        pass


def produce(monkeypatch: pytest.MonkeyPatch, producer: FakeProducer, lines: int) -> int:
    class NoAdmin:
        def __init__(self, config: object) -> None:
            pass

        def __enter__(self) -> NoAdmin:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr(console_commands, "Admin", NoAdmin)
    one_partition = SimpleNamespace(partitions=[0])  # what the command reads of the topic
    monkeypatch.setattr(console_commands, "require_topic", lambda admin, topic: one_partition)
    monkeypatch.setattr(console_commands, "Producer", lambda settings: producer)
    text = b"".join(b"line %d\n" % n for n in range(lines))
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(text)))
    args = argparse.Namespace(
        topic="t",
        partition=None,
        compression="none",
        producer_property=[],
        line_format=LineFormat(),
        bootstrap_server="127.0.0.1:1",
    )
    return console_commands._produce(args)


def test_settled_records_are_let_go_while_the_input_is_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = FakeProducer()
    assert produce(monkeypatch, producer, 20_000) == 0
    assert producer.sent == 20_000
    assert producer.most_alive < 100, "a future kept per line of input"
    assert "produced 20,000 records" in capsys.readouterr().err


def test_failed_records_are_counted_and_the_first_error_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert produce(monkeypatch, FakeProducer(fail_every=1000), 20_000) == 1
    err = capsys.readouterr().err
    assert "produced 19,980 records" in err
    assert "samsa produce: 20 records failed: record too large" in err

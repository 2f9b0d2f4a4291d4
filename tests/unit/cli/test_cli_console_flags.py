"""Goal: `samsa produce` and `samsa consume` take the flags of Kafka's console producer and
consumer beside their own: `--topic` for the positional topic, `--max-messages` for `--count`,
`--timeout-ms` for `--timeout` (in milliseconds; either is a finite wait of 0 or more, else
a usage error); a missing or doubled topic is a usage error that
says what to type, before anything connects. `consume`'s `--consumer-property` settings merge with
the flags that set one (`--group`, `--from-beginning`, `--isolation-level`), and a flag and a
property that disagree are refused before connecting.

Method: the real argparse tree of `samsa` and `run()` on a namespace with no cluster behind it
(the usage errors return before the first connection; the end-to-end commands are in
tests/integration/test_cli_commands.py).
"""

from __future__ import annotations

import argparse

import pytest

from samsa.cli.commands import add_commands, run
from samsa.cli.console_commands import prepare_console


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_the_topic_is_positional_or_a_flag(command: str) -> None:
    for argv in ([command, "orders"], [command, "--topic", "orders"]):
        args = parse(*argv)
        assert prepare_console(args) is None
        assert args.topic == "orders"
    same = parse(command, "orders", "--topic", "orders")
    assert prepare_console(same) is None and same.topic == "orders"


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_no_topic_or_two_is_a_usage_error_before_connecting(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # No server listens on port 1: reaching the cluster would be a different error (code 1).
    bootstrap = ["--bootstrap-server", "127.0.0.1:1"]
    assert run(parse(command, *bootstrap)) == 2
    assert f"name the topic: samsa {command} TOPIC (or --topic TOPIC)" in capsys.readouterr().err
    assert run(parse(command, "a", "--topic", "b", *bootstrap)) == 2
    assert "two topics given (a and b): name one" in capsys.readouterr().err


def test_kafkas_console_consumer_limits_mean_ours() -> None:
    args = parse("consume", "t", "--max-messages", "7", "--timeout-ms", "1500")
    assert (args.count, args.timeout) == (7, 1.5)
    args = parse("consume", "t", "--count", "7", "--timeout", "2")
    assert (args.count, args.timeout) == (7, 2.0)
    assert parse("consume", "t").timeout is None


def test_both_idle_timeouts_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("consume", "t", "--timeout", "1", "--timeout-ms", "1000")
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ("--timeout", "nan"),  # compared false with every deadline: it never stopped
        ("--timeout", "inf"),
        ("--timeout", "-1"),  # stopped at once
        ("--timeout", "soon"),
        ("--timeout-ms", "-5"),
        ("--timeout-ms", "1.5"),
    ],
)
def test_an_idle_timeout_that_is_no_wait_is_a_usage_error(
    argv: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("consume", "t", *argv)
    assert exited.value.code == 2
    assert argv[0] in capsys.readouterr().err
    assert parse("consume", "t", "--timeout", "0").timeout == 0.0


def test_consumer_properties_merge_with_the_flags_that_set_them() -> None:
    args = parse(
        "consume",
        "t",
        "--consumer-property",
        "fetch.max.wait.ms=100",
        "--consumer-property",
        "isolation.level=read_committed",
        "--from-beginning",
    )
    assert prepare_console(args) is None
    assert args.consumer_settings == {
        "fetch.max.wait.ms": "100",
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    }
    assert args.group is None
    flags = parse("consume", "t", "--isolation-level", "read_committed", "--group", "g")
    assert prepare_console(flags) is None
    assert flags.consumer_settings == {"isolation.level": "read_committed"}
    assert flags.group == "g"
    grouped = parse("consume", "t", "--consumer-property", "group.id=g")
    assert prepare_console(grouped) is None
    assert (grouped.group, grouped.consumer_settings) == ("g", {}), "as --group g"
    assert parse("consume", "t").isolation_level is None, "the SDK's default: read_uncommitted"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--isolation-level", "read_committed", "--consumer-property", "isolation.level=x"],
            "--isolation-level and --consumer-property isolation.level=x disagree",
        ),
        (
            ["--from-beginning", "--consumer-property", "auto.offset.reset=latest"],
            "--from-beginning and --consumer-property auto.offset.reset=latest disagree",
        ),
        (
            ["--group", "a", "--consumer-property", "group.id=b"],
            "--group and --consumer-property group.id=b disagree",
        ),
    ],
)
def test_a_flag_and_a_property_that_disagree_are_refused_before_connecting(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(parse("consume", "t", *argv, "--bootstrap-server", "127.0.0.1:1")) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_isolation_level_is_refused_by_argparse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("consume", "t", "--isolation-level", "committed")
    assert exited.value.code == 2
    assert "invalid choice: 'committed'" in capsys.readouterr().err

"""Goal: the `samsa` command's own words agree with what the README promises of it, where a walk
of the README against a live cluster found them apart: `--bootstrap-server` takes brokers as well
as controllers (the README's "bootstrap.servers may list brokers ... or controllers"), yet every
command's help said "controller endpoints"; and `topics offsets --time` takes earliest, latest and
max-timestamp besides a time, yet a wrong value was answered "is neither ms since epoch nor ISO
8601", hiding the named points a user most likely meant.

Method: the real argparse tree of `samsa` (every sub-command that has the flag) and the pure
`offset_spec` of topic_offsets.py; nothing connects to a cluster.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from samsa.cli.commands import add_commands
from samsa.cli.topic_offsets import offset_spec


def every_parser(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """`parser` and every sub-command's parser below it, with its program name."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from every_parser(child)


def bootstrap_helps() -> dict[str, str]:
    root = argparse.ArgumentParser(prog="samsa")
    add_commands(root.add_subparsers(dest="command", required=True))
    helps = {}
    for prog, parser in every_parser(root):
        for action in parser._actions:
            if "--bootstrap-server" in action.option_strings:
                helps[prog] = action.help or ""
    return helps


def test_every_bootstrap_server_help_says_brokers_work_too() -> None:
    helps = bootstrap_helps()
    assert len(helps) > 10, helps  # topics, produce, consume, groups, transactions, cluster, ...
    wrong = {prog: text for prog, text in helps.items() if "broker" not in text}
    assert wrong == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", "earliest"),
        ("-1", "latest"),
        ("max-timestamp", "max_timestamp"),
        ("max_timestamp", "max_timestamp"),
        ("1700000000000", 1_700_000_000_000),
    ],
)
def test_time_specs_the_readme_names_are_taken(text: str, expected: str | int) -> None:
    assert offset_spec(text) == expected


def test_a_wrong_time_names_every_accepted_form() -> None:
    with pytest.raises(SystemExit) as refused:
        offset_spec("lastest")
    message = str(refused.value)
    assert "'lastest'" in message
    for accepted in ("earliest", "latest", "max-timestamp", "ms since epoch", "ISO 8601"):
        assert accepted in message, message

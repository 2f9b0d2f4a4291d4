"""Goal: one command talks to one cluster. `--bootstrap-server` wins over a `bootstrap.servers`
among --producer-property / --consumer-property (Kafka's console and perf tools set the flag's
value after the properties) for every client of `produce`, `consume` (assigned or in a group)
and `perf produce|consume`; with no flag, such a property names the cluster for all of them
(the Admin that checks the topic too), before $SAMSA_BOOTSTRAP and cluster.json.

Method: the commands over stand-in Admin, Producer and Consumer classes that record their
settings and stop the command at the first client made (no cluster).
"""

from __future__ import annotations

import argparse
import io
import sys
from types import SimpleNamespace

import pytest

from samsa.cli import console_commands, perf_commands
from samsa.cli.command_support import bootstrap
from samsa.cli.commands import add_commands
from samsa.cli.console_commands import prepare_console


class Stop(Exception):
    """Raised by a stand-in producer or consumer: the command has made its clients."""


class Clients:
    def __init__(self) -> None:
        self.servers: list[tuple[str, object]] = []

    def client(self, kind: str) -> type:
        clients = self

        class StandIn:
            def __init__(self, config: dict[str, object]) -> None:
                clients.servers.append((kind, config["bootstrap.servers"]))
                raise Stop

        return StandIn


class StandInAdmin:
    made: Clients

    def __init__(self, config: dict[str, object]) -> None:
        self.made.servers.append(("admin", config["bootstrap.servers"]))

    def __enter__(self) -> StandInAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def describe_topics(self, names: object = None) -> dict[str, SimpleNamespace]:
        return {"t": SimpleNamespace(partitions=[SimpleNamespace(partition=0)])}


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Clients:
    clients = Clients()
    StandInAdmin.made = clients
    for module in (console_commands, perf_commands):
        monkeypatch.setattr(module, "Admin", StandInAdmin)
        monkeypatch.setattr(module, "Producer", clients.client("producer"))
        monkeypatch.setattr(module, "Consumer", clients.client("consumer"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    monkeypatch.setenv("SAMSA_BOOTSTRAP", "env:1")
    return clients


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


COMMANDS = [
    ("produce", "t", "--producer-property", "bootstrap.servers=prop:1"),
    ("consume", "t", "--consumer-property", "bootstrap.servers=prop:1"),
    ("consume", "t", "--group", "g", "--consumer-property", "bootstrap.servers=prop:1"),
    (
        "perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
        "--producer-property", "bootstrap.servers=prop:1",
    ),
    (
        "perf", "consume", "--topic", "t", "--messages", "1",
        "--consumer-property", "bootstrap.servers=prop:1",
    ),
]  # fmt: skip


def run_until_clients(args: argparse.Namespace) -> None:
    with pytest.raises(Stop):
        if args.command == "perf":
            perf_commands.run_perf(args)
        else:
            assert prepare_console(args) is None
            console_commands.run_console(args)


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_the_flag_wins_over_the_property_for_every_client(
    argv: tuple[str, ...], made: Clients
) -> None:
    args = parse(*argv, "--bootstrap-server", "flag:1")
    assert bootstrap(args) == "flag:1"
    run_until_clients(args)
    kinds = [kind for kind, _ in made.servers]
    assert "producer" in kinds or "consumer" in kinds
    assert made.servers == [(kind, "flag:1") for kind in kinds]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_without_the_flag_the_property_names_the_cluster_for_every_client(
    argv: tuple[str, ...], made: Clients
) -> None:
    args = parse(*argv)
    assert bootstrap(args) == "prop:1"  # before $SAMSA_BOOTSTRAP: it is on the command line
    run_until_clients(args)
    assert made.servers == [(kind, "prop:1") for kind, _ in made.servers]


def test_without_flag_or_property_the_environment_names_the_cluster(made: Clients) -> None:
    args = parse("produce", "t", "--producer-property", "acks=1")
    assert bootstrap(args) == "env:1"
    run_until_clients(args)
    assert made.servers == [("admin", "env:1"), ("producer", "env:1")]

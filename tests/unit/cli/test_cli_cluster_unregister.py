"""Goal: `samsa cluster unregister --id N` (Kafka's kafka-cluster.sh unregister) sits beside
`samsa cluster`, which keeps describing the cluster as before; the connection flags count on
either side of `unregister` (argparse would copy the action's defaults over the command's own
flags); a success is one line on stdout, a refusal one line on stderr with exit 1.

Method: the real argparse tree of `samsa` and commands.run with the Admin it makes and the
reachability check replaced by stand-ins (no cluster); the command against a real cluster is
in tests/integration/test_broker_unregistration.py.
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

import pytest

from samsa.cli import commands
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa")
    commands.add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def test_cluster_alone_still_describes_with_its_flags() -> None:
    args = parse("cluster", "--partitions", "--bootstrap-server", "h:1")
    assert (args.cluster_action, args.partitions, args.bootstrap_server) == (None, True, "h:1")
    assert parse("cluster").data_dir == "samsa-data"


@pytest.mark.parametrize(
    "argv",
    [
        ("cluster", "--bootstrap-server", "h:1", "unregister", "--id", "2"),
        ("cluster", "unregister", "--id", "2", "--bootstrap-server", "h:1"),
        (
            "cluster",
            "--bootstrap-server",
            "other:9",
            "unregister",
            "--bootstrap-server",
            "h:1",
            "--id",
            "2",
        ),
    ],
)
def test_unregister_takes_the_connection_flags_on_either_side(argv: tuple[str, ...]) -> None:
    args = parse(*argv)
    assert (args.cluster_action, args.broker_id, args.bootstrap_server) == ("unregister", 2, "h:1")
    assert args.data_dir == "samsa-data"


def test_unregister_needs_an_id(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        parse("cluster", "unregister")
    assert usage.value.code == 2 and "--id" in capsys.readouterr().err


class StandInAdmin:
    made: ClassVar[list[StandInAdmin]] = []
    refusal: ClassVar[KafkaError | None] = None

    def __init__(self, config: dict[str, Any]) -> None:
        self.config, self.unregistered = config, []  # type: ignore[var-annotated]
        StandInAdmin.made.append(self)

    def __enter__(self) -> StandInAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def unregister_broker(self, broker_id: int) -> None:
        self.unregistered.append(broker_id)
        if StandInAdmin.refusal is not None:
            raise StandInAdmin.refusal


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> type[StandInAdmin]:
    StandInAdmin.made, StandInAdmin.refusal = [], None
    monkeypatch.setattr(commands, "Admin", StandInAdmin)
    monkeypatch.setattr(commands, "_check_reachable", lambda servers, settings: None)
    return StandInAdmin


def test_a_success_is_one_line(
    admin: type[StandInAdmin], capsys: pytest.CaptureFixture[str]
) -> None:
    code = commands.run(parse("cluster", "unregister", "--id", "4", "--bootstrap-server", "h:1"))
    assert code == 0
    [made] = admin.made
    assert made.config == {"bootstrap.servers": "h:1"} and made.unregistered == [4]
    assert capsys.readouterr().out == "broker 4 unregistered\n"


def test_a_refusal_is_one_line_on_stderr_and_exit_1(
    admin: type[StandInAdmin], capsys: pytest.CaptureFixture[str]
) -> None:
    admin.refusal = KafkaError(
        "broker 4 still holds replicas of 1 partition(s) (t-0): move them",
        ErrorCode.INVALID_REQUEST,
    )
    code = commands.run(parse("cluster", "unregister", "--id", "4", "--bootstrap-server", "h:1"))
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err == (
        "samsa cluster: broker 4 still holds replicas of 1 partition(s) (t-0): move them "
        "(INVALID_REQUEST)\n"
    )

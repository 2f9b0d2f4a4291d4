"""Goal: `samsa users` reads its flags, takes the password from a file, a no-echo prompt or one
line of stdin (never argv), and prints what Admin answered in Kafka's words; a malformed command
is a usage error (exit 2) before any cluster is asked. The SDK's pure half (scram_admin.py)
salts the password into the request (the password itself never in it) and reads the answers
back, per user.

Method: `samsa.cli.main.main` with malformed flags and an address nothing listens on (the usage
error comes first, so nothing is dialled); `read_password` on files and stand-in stdins; the
formatting function and the pure request builders and answer readers on hand-built messages.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from samsa.cli import user_commands
from samsa.cli.main import main as samsa_main
from samsa.cli.user_commands import credential_lines, read_password
from samsa.client import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from samsa.client.errors import KafkaError
from samsa.client.scram_admin import alter_request, altered, describe_request, described
from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

SALT = b"\x01" * 32


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["set-scram", "--user", "a", "--mechanism", "SCRAM-SHA-1"], "unknown SASL mechanism"),
        (["delete-scram", "--user", "a", "--mechanism", "PLAIN"], "unknown SASL mechanism"),
        (["set-scram", "--user", "", "--mechanism", "SCRAM-SHA-256"], "--user needs a user"),
        (["describe", "--user", ""], "--user needs a user"),
        (
            ["set-scram", "--user", "a", "--mechanism", "SCRAM-SHA-256", "--iterations", "4095"],
            "--iterations must be 4096 to 16384",
        ),
    ],
)
def test_a_malformed_command_is_a_usage_error_before_the_cluster_is_asked(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samsa_main(["users", *flags, "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert message in capsys.readouterr().err


def test_the_password_is_not_an_argument(capsys: pytest.CaptureFixture[str]) -> None:
    # Not even abbreviated: `--password S` would otherwise be --password-file S.
    with pytest.raises(SystemExit):
        samsa_main(["users", "set-scram", "--user", "a", "--mechanism", "x", "--password", "S"])
    assert "unrecognized arguments: --password S" in capsys.readouterr().err


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_password_comes_from_a_file_a_prompt_or_one_line_of_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "pw"
    path.write_text("from-file\nignored\n")
    assert read_password(str(path), io.StringIO("not this")) == "from-file"
    assert read_password(None, io.StringIO("piped secret\nnext\n")) == "piped secret"
    monkeypatch.setattr(user_commands.getpass, "getpass", lambda prompt: "typed")
    assert read_password(None, Tty("")) == "typed"
    for empty in (io.StringIO(""), io.StringIO("\n")):
        with pytest.raises(ValueError, match="empty"):
            read_password(None, empty)


def test_the_credentials_are_printed_as_kafka_prints_them() -> None:
    described_users = {
        "alice": [ScramCredentialInfo("SCRAM-SHA-256", 8192), ScramCredentialInfo("SCRAM-SHA-512")],
        "bob": [],
    }
    assert credential_lines(described_users).splitlines() == [
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096",
        "No SCRAM credentials for user-principal 'bob'",
    ]
    assert credential_lines({}) == "no SCRAM credentials are set"


def test_an_upsertion_sends_the_salted_password_never_the_password() -> None:
    salts = iter([SALT])
    request = alter_request(
        [
            UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo("scram-sha-512", 8192), "sécret"
            ),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo("SCRAM-SHA-256"), b"pw", b"s"),
            UserScramCredentialDeletion("carol", "SCRAM-SHA-256"),
        ],
        lambda: next(salts),
    )
    alice, bob = request.upsertions
    assert (alice.name, alice.mechanism, alice.iterations, alice.salt) == ("alice", 2, 8192, SALT)
    assert alice.salted_password == scram.salted_password(scram.SCRAM_SHA_512, "sécret", SALT, 8192)
    assert "sécret".encode() not in request.SerializeToString()
    assert (bob.salt, bob.iterations) == (b"s", 4096), "a given salt is kept"
    assert [(d.name, d.mechanism) for d in request.deletions] == [("carol", 1)]


@pytest.mark.parametrize(
    "alteration, says",
    [
        (UserScramCredentialDeletion("a", "PLAIN"), "unknown SASL mechanism"),
        (
            UserScramCredentialUpsertion("a", ScramCredentialInfo("SCRAM-SHA-256", 10**9), "p"),
            "iterations",
        ),
        (UserScramCredentialUpsertion("a", ScramCredentialInfo(256, 4096), "p"), "its name"),  # type: ignore[arg-type]
    ],
)
def test_a_value_the_call_cannot_send_is_refused_before_salting(alteration, says) -> None:
    with pytest.raises(ValueError, match=says):
        alter_request([alteration], lambda: SALT)
    with pytest.raises(TypeError, match="UserScramCredentialUpsertion"):
        alter_request(["alice"], lambda: SALT)  # type: ignore[list-item]


def test_answers_are_read_per_user() -> None:
    response = c.AlterUserScramCredentialsResponse(
        results=[
            c.AlterUserScramCredentialsResponse.Result(name="a"),
            c.AlterUserScramCredentialsResponse.Result(
                name="b", error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message="no such"
            ),
        ]
    )
    outcome = altered(response)
    assert outcome["a"] is None
    assert (
        isinstance(outcome["b"], KafkaError) and outcome["b"].code == ErrorCode.RESOURCE_NOT_FOUND
    )
    assert list(describe_request(["b", "a", "b"], 7).users) == ["b", "a"]
    assert describe_request(None, 7).min_metadata_offset == 7
    Result = c.DescribeUserScramCredentialsResponse.Result
    Info = c.DescribeUserScramCredentialsResponse.CredentialInfo
    answer = c.DescribeUserScramCredentialsResponse(
        results=[
            Result(name="a", credentials=[Info(mechanism=1, iterations=4096)]),
            Result(name="b", error_code=ErrorCode.RESOURCE_NOT_FOUND),
        ]
    )
    assert described(answer) == {"a": [ScramCredentialInfo("SCRAM-SHA-256", 4096)], "b": []}
    answer.results.add(name="c", error_code=ErrorCode.DUPLICATE_RESOURCE, error_message="twice")
    with pytest.raises(KafkaError, match="user 'c'"):
        described(answer)

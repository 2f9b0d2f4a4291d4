"""`samsa users`: users' SCRAM credentials, as Kafka's `kafka-configs.sh --entity-type users
--alter --add-config 'SCRAM-SHA-256=[...]'` — thin over Admin.alter_user_scram_credentials and
Admin.describe_user_scram_credentials.

    describe [--user U ...]                       mechanisms and iterations, never a key
    set-scram --user U --mechanism M [--iterations N] [--password-file F]
    delete-scram --user U --mechanism M

The password is never an argument (it would show in `ps` and shell histories): set-scram reads
the first line of --password-file, else asks for it without echo on a terminal, else reads one
line of standard input (`echo "$PW" | samsa users set-scram ...`). The SDK salts it; the cluster
never sees it. describe prints Kafka's lines: "SCRAM credential configs for user-principal
'alice' are SCRAM-SHA-256=iterations=8192".
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from samsa.cli.command_support import client_config
from samsa.client import (
    Admin,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from samsa.common import scram


def add_users_command(commands: argparse._SubParsersAction, add_connection: object) -> None:
    users = commands.add_parser(
        "users",
        help="users' SCRAM credentials: set, describe, delete (kafka-configs.sh --entity-type "
        "users, SCRAM-SHA-256/512)",
    )
    actions = users.add_subparsers(dest="users_action", required=True)
    describe = actions.add_parser("describe", help="which users have which SCRAM credentials")
    describe.add_argument(
        "--user", action="append", metavar="U", help="a user to describe (repeatable; default: all)"
    )
    set_scram = actions.add_parser(  # no abbreviations: `--password S` is no --password-file
        "set-scram",
        help="create or replace a user's credential (password from a file or stdin)",
        allow_abbrev=False,
    )
    delete = actions.add_parser("delete-scram", help="delete a user's credential")
    for parser in (set_scram, delete):
        parser.add_argument("--user", required=True, metavar="U", help="the user's name")
        parser.add_argument(
            "--mechanism", required=True, metavar="M", help=" or ".join(scram.MECHANISMS)
        )
    set_scram.add_argument(
        "--iterations",
        type=int,
        default=scram.ITERATIONS_MIN,
        help=f"PBKDF2 iterations, {scram.ITERATIONS_MIN} to {scram.ITERATIONS_MAX} (default "
        f"{scram.ITERATIONS_MIN})",
    )
    set_scram.add_argument(
        "--password-file",
        metavar="F",
        help="a file whose first line is the password (default: ask, or one line of stdin)",
    )
    for parser in (describe, set_scram, delete):
        add_connection(parser)  # type: ignore[operator]


def users_usage_error(args: argparse.Namespace) -> str | None:
    """A usage error argparse cannot see (exit 2), or None."""
    if args.users_action == "describe":
        if args.user is not None and not all(args.user):
            return "--user needs a user's name"
        return None
    if not args.user:
        return "--user needs a user's name"
    try:
        scram.mechanism_named(args.mechanism)
    except scram.ScramError as error:
        return f"--mechanism: {error}"
    if args.users_action == "set-scram" and not (
        scram.ITERATIONS_MIN <= args.iterations <= scram.ITERATIONS_MAX
    ):
        return f"--iterations must be {scram.ITERATIONS_MIN} to {scram.ITERATIONS_MAX}"
    return None


def read_password(password_file: str | None, stdin: TextIO) -> str:
    """The password: the file's first line, else a no-echo prompt on a terminal, else one line
    of `stdin`. ValueError for an empty one."""
    if password_file is not None:
        lines = Path(password_file).read_text(encoding="utf-8").splitlines()
        password = lines[0] if lines else ""
    elif stdin.isatty():
        password = getpass.getpass("Password: ")
    else:
        password = stdin.readline().rstrip("\r\n")
    if not password:
        raise ValueError("the password is empty")
    return password


def run_users(args: argparse.Namespace, bootstrap: str) -> int:
    if args.users_action == "set-scram":
        try:
            password = read_password(args.password_file, sys.stdin)
        except (OSError, ValueError, UnicodeDecodeError) as error:
            print(f"samsa users: cannot read the password: {error}", file=sys.stderr)
            return 2
        info = ScramCredentialInfo(args.mechanism.upper(), args.iterations)
        change: object = UserScramCredentialUpsertion(args.user, info, password)
    elif args.users_action == "delete-scram":
        change = UserScramCredentialDeletion(args.user, args.mechanism.upper())
    with Admin(client_config(args, bootstrap)) as admin:
        if args.users_action == "describe":
            print(credential_lines(admin.describe_user_scram_credentials(args.user)))
            return 0
        errors = admin.alter_user_scram_credentials([change])  # type: ignore[list-item]
    error = errors.get(args.user)
    if error is not None:
        raise error
    print(f"Completed updating config for user {args.user}.")
    return 0


def credential_lines(described: Mapping[str, Sequence[ScramCredentialInfo]]) -> str:
    """Kafka's lines, one per user."""
    if not described:
        return "no SCRAM credentials are set"
    return "\n".join(
        f"SCRAM credential configs for user-principal '{user}' are "
        + ", ".join(f"{i.mechanism}=iterations={i.iterations}" for i in infos)
        if infos
        else f"No SCRAM credentials for user-principal '{user}'"
        for user, infos in described.items()
    )

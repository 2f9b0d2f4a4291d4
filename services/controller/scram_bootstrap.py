"""The SCRAM bootstrap file (`sasl.scram.bootstrap.credentials`): the first users of a cluster,
in the syntax of Kafka's `kafka-storage format --add-scram`, so that a cluster started with SASL
has an administrator before anyone could call AlterUserScramCredentials.

One credential a line; blank lines and lines starting with # are ignored:

    SCRAM-SHA-256=[name=admin,password=admin-secret]
    SCRAM-SHA-512=[name=alice,password="with,comma",iterations=8192]

`name` and `password` are required, `iterations` is optional (4096, Kafka's default); a value may
be double-quoted to hold a comma or a bracket. A (name, mechanism) given twice, an unknown key or
mechanism, iterations out of 4096..16384 or a name out of 1..255 characters is refused with the
line's number (never its text: it holds a password). The active controller writes them when it
becomes active and the cluster holds no credential at all (scram_control.bootstrap_credentials):
once one exists, the API owns them all. Pure: no I/O;
scram_bootstrap_file.py reads the file and draws the salts.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.common import scram

# Kafka's default iterations for --add-scram.
ITERATIONS_DEFAULT = scram.ITERATIONS_MIN
# A bootstrap file of more lines than this is not a list of first users.
LINES_MAX = 1000
_KEYS = ("name", "password", "iterations")


class BootstrapFileError(ValueError):
    """The file cannot be used; the message names the line and what to fix."""


@dataclass(frozen=True)
class BootstrapCredential:
    """One line of the file."""

    mechanism: scram.Mechanism
    name: str
    password: str
    iterations: int


def parse_bootstrap_credentials(text: str) -> list[BootstrapCredential]:
    """Every credential of the file, in order; BootstrapFileError naming the first bad line."""
    lines = text.splitlines()
    if len(lines) > LINES_MAX:
        raise BootstrapFileError(f"{len(lines)} lines, at most {LINES_MAX}")
    found: list[BootstrapCredential] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            credential = _parse_line(stripped)
        except BootstrapFileError as error:
            raise BootstrapFileError(f"line {number}: {error}") from None
        key = (credential.name, credential.mechanism.name)
        if key in seen:
            raise BootstrapFileError(
                f"line {number}: {credential.mechanism.name} of {credential.name!r} is already "
                f"given on line {seen[key]}; keep one"
            )
        seen[key] = number
        found.append(credential)
    return found


def _parse_line(line: str) -> BootstrapCredential:
    mechanism_text, equals, rest = line.partition("=")
    if not equals or not rest.startswith("[") or not rest.endswith("]"):
        raise BootstrapFileError(
            "expected MECHANISM=[name=NAME,password=PASSWORD] (optionally ,iterations=N)"
        )
    try:
        mechanism = scram.mechanism_named(mechanism_text)
    except scram.ScramError as error:
        raise BootstrapFileError(str(error)) from None
    values = _attributes(rest[1:-1])
    for key in ("name", "password"):
        if key not in values:
            raise BootstrapFileError(f"{key}= is missing")
    iterations_text = values.get("iterations", str(ITERATIONS_DEFAULT))
    if not iterations_text.isdigit():
        raise BootstrapFileError(f"iterations must be a whole number, not {iterations_text!r}")
    iterations = int(iterations_text)
    name = values["name"]
    problem = scram.credential_problem(
        mechanism, name, b"s", bytes(mechanism.digest_bytes), iterations
    )
    if problem is not None:
        raise BootstrapFileError(problem)
    if not values["password"]:
        raise BootstrapFileError("the password is empty")
    return BootstrapCredential(mechanism, name, values["password"], iterations)


def _attributes(text: str) -> dict[str, str]:
    """key=value pairs, comma-separated; a value in double quotes may hold commas."""
    values: dict[str, str] = {}
    position = 0
    while position < len(text):
        key, equals, _ = text[position:].partition("=")
        key = key.strip()
        if not equals:
            raise BootstrapFileError(f"{key!r} is not key=value")
        if key not in _KEYS:
            raise BootstrapFileError(f"unknown key {key!r}: expected {', '.join(_KEYS)}")
        if key in values:
            raise BootstrapFileError(f"{key}= is given twice")
        position += text[position:].index("=") + 1
        if text.startswith('"', position):
            end = text.find('"', position + 1)
            if end < 0:
                raise BootstrapFileError(f"the quoted {key} has no closing quote")
            value, position = text[position + 1 : end], end + 1
            if position < len(text) and text[position] != ",":
                raise BootstrapFileError(f"expected ',' after the quoted {key}")
        else:
            end = text.find(",", position)
            end = len(text) if end < 0 else end
            value, position = text[position:end], end
        values[key] = value
        position += 1  # the comma
    return values


def derive_credentials(
    entries: list[BootstrapCredential], salts: list[bytes]
) -> dict[tuple[str, int], scram.ScramCredential]:
    """The stored credential of each entry, salted with its salt (the caller draws them), keyed
    as the image keys them: what the controller writes, without the passwords."""
    return {
        (entry.name, entry.mechanism.number): scram.credential_for_password(
            entry.mechanism, entry.password, salt, entry.iterations
        )
        for entry, salt in zip(entries, salts, strict=True)
    }

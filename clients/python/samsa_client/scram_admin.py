"""Admin's SCRAM credential calls, the pure half: AlterUserScramCredentials and
DescribeUserScramCredentials requests from confluent-kafka's values, and the answers back
(KIP-554).

A mechanism is its SASL name, "SCRAM-SHA-256" or "SCRAM-SHA-512" (any case). An upsertion names
the user, a ScramCredentialInfo (mechanism, iterations) and the password; the password never
leaves the client: this salts it (PBKDF2 with the mechanism's hash, `common.scram`) and sends the
salted password, as Kafka's clients do. The salt is the upsertion's, or a fresh random 32 bytes
the caller draws (`new_salt`: admin_scram.py). The controller refuses each user's changes
together and answers per user; the others apply. Pure: admin_scram.py sends the requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from samsa.client.errors import KafkaError
from samsa.common import scram
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c

Request = c.AlterUserScramCredentialsRequest


@dataclass(frozen=True)
class ScramCredentialInfo:
    """A mechanism and its PBKDF2 iterations (4096..16384; Kafka's default is 4096)."""

    mechanism: str
    iterations: int = scram.ITERATIONS_MIN


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set (create or replace) `user`'s credential for one mechanism."""

    user: str
    scram_credential_info: ScramCredentialInfo
    password: str | bytes
    salt: bytes | None = None


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Delete `user`'s credential for `mechanism`."""

    user: str
    mechanism: str


Alteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


def mechanism_of(name: object) -> scram.Mechanism:
    """The mechanism a SASL name stands for; ValueError listing the known ones."""
    if not isinstance(name, str):
        raise ValueError(f"a SCRAM mechanism is its name ({', '.join(scram.MECHANISMS)})")
    try:
        return scram.mechanism_named(name)
    except scram.ScramError as error:
        raise ValueError(str(error)) from None


def alter_request(alterations: Iterable[Alteration], new_salt: Callable[[], bytes]) -> Request:
    """The request carrying `alterations`; ValueError for a value the call cannot send (an
    unknown mechanism, iterations out of bounds: a client-side PBKDF2 of a billion iterations
    would hang before the controller could refuse it)."""
    request = Request()
    for alteration in alterations:
        if isinstance(alteration, UserScramCredentialDeletion):
            mechanism = mechanism_of(alteration.mechanism)
            request.deletions.add(name=alteration.user, mechanism=mechanism.number)  # type: ignore[arg-type]
        elif isinstance(alteration, UserScramCredentialUpsertion):
            request.upsertions.append(_upsertion(alteration, new_salt))
        else:
            raise TypeError(
                "alter_user_scram_credentials takes UserScramCredentialUpsertion and "
                f"UserScramCredentialDeletion values, not {type(alteration).__name__}"
            )
    return request


def _upsertion(
    alteration: UserScramCredentialUpsertion, new_salt: Callable[[], bytes]
) -> Request.Upsertion:
    info = alteration.scram_credential_info
    mechanism = mechanism_of(info.mechanism)
    if not scram.ITERATIONS_MIN <= info.iterations <= scram.ITERATIONS_MAX:
        raise ValueError(
            f"user {alteration.user!r}: iterations must be {scram.ITERATIONS_MIN} to "
            f"{scram.ITERATIONS_MAX}, not {info.iterations}"
        )
    password = alteration.password
    if isinstance(password, bytes):
        password = password.decode("utf-8")
    salt = new_salt() if alteration.salt is None else alteration.salt
    return Request.Upsertion(
        name=alteration.user,
        mechanism=mechanism.number,  # type: ignore[arg-type]
        iterations=info.iterations,
        salt=salt,
        salted_password=scram.salted_password(mechanism, password, salt, info.iterations),
    )


def altered(response: c.AlterUserScramCredentialsResponse) -> dict[str, KafkaError | None]:
    """Each user's refusal, or None once all of its changes applied."""
    return {
        result.name: None
        if result.error_code == ErrorCode.NONE
        else KafkaError.of(result.error_code, result.error_message)
        for result in response.results
    }


def describe_request(
    users: Iterable[str] | None, min_metadata_offset: int
) -> c.DescribeUserScramCredentialsRequest:
    """Every user (None), or each user named once, in order."""
    named = list(dict.fromkeys(users or ()))
    return c.DescribeUserScramCredentialsRequest(
        users=named, min_metadata_offset=min_metadata_offset
    )


def described(
    response: c.DescribeUserScramCredentialsResponse,
) -> dict[str, list[ScramCredentialInfo]]:
    """Each user's credentials by mechanism; a named user without any has an empty list. Any
    other refusal is raised (KafkaError)."""
    outcome: dict[str, list[ScramCredentialInfo]] = {}
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            outcome[result.name] = []
        elif result.error_code != ErrorCode.NONE:
            error = KafkaError.of(result.error_code, result.error_message)
            raise KafkaError(f"user {result.name!r}: {error}", error.code)
        else:
            outcome[result.name] = [
                ScramCredentialInfo(scram.MECHANISMS_BY_NUMBER[i.mechanism].name, i.iterations)
                for i in result.credentials
                if i.mechanism in scram.MECHANISMS_BY_NUMBER
            ]
    return outcome

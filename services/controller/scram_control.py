"""SCRAM credential decisions: AlterUserScramCredentials (KIP-554) and the bootstrap file's
credentials (Kafka's `kafka-storage format --add-scram`).

Theory of operation. A credential is metadata like an ACL: the active controller checks each
change of the request and commits a UserScramCredentialRecord per credential set and a
RemoveUserScramCredentialRecord per credential deleted (metadata/scram_credentials.py keeps them
in the image); every process learns them by following the metadata log and checks its clients'
SCRAM proofs against its own image. The client sends the salted password, never the password;
this derives the StoredKey and ServerKey from it (common/scram.py) and stores only those.

Each user's changes succeed or fail together, as Kafka's ScramControlManager answers per user; the
other users' changes still apply. A user's changes are refused, in this order of checks, with:
UNSUPPORTED_SASL_MECHANISM for a mechanism that is unset or unknown; DUPLICATE_RESOURCE for a
(user, mechanism) the request names twice (deleted and set, or set twice: applied in order they
would leave a state no check saw); UNACCEPTABLE_CREDENTIAL for a credential
`scram.credential_problem` refuses (name, iterations, salt, salted password length);
RESOURCE_NOT_FOUND for deleting a credential that does not exist; POLICY_VIOLATION when the
cluster would hold more than limits.scram_credentials_max credentials. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from samsa.common import limits, scram
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.metadata.scram_credentials import credential_of, credential_record, removal_record
from samsa.services.controller.control_result import ControlResult
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

# What one credential's records weigh at most: a UTF-8 name, a salt, two keys, framing. A maximal
# request commits as one metadata batch; every credential fits one Describe answer.
SCRAM_RECORD_BYTES_MAX = 4 * scram.USER_NAME_CHARS_MAX + scram.SALT_BYTES_MAX + 2 * 64 + 32
assert limits.admin_request_items_max * SCRAM_RECORD_BYTES_MAX <= limits.metadata_batch_bytes_max
assert (
    limits.scram_credentials_max * SCRAM_RECORD_BYTES_MAX + limits.MIB
    <= limits.grpc_message_bytes_max
)

Deletion = c.AlterUserScramCredentialsRequest.Deletion
Upsertion = c.AlterUserScramCredentialsRequest.Upsertion
Refusal = tuple[ErrorCode, str]


@dataclass
class _UserChanges:
    deletions: list[Deletion]
    upsertions: list[Upsertion]


def alter_user_scram_credentials(
    image: MetadataImage, request: c.AlterUserScramCredentialsRequest
) -> ControlResult[c.AlterUserScramCredentialsResponse]:
    """Each user's records, or its refusal (see the module doc); one result per user, in the
    order the request first names them (its deletions, then its upsertions)."""
    users: dict[str, _UserChanges] = {}
    for deletion in request.deletions:
        users.setdefault(deletion.name, _UserChanges([], [])).deletions.append(deletion)
    for upsertion in request.upsertions:
        users.setdefault(upsertion.name, _UserChanges([], [])).upsertions.append(upsertion)
    response = c.AlterUserScramCredentialsResponse()
    records: list[m.MetadataRecord] = []
    held = len(image.scram_credentials)
    for name, changes in users.items():
        result = response.results.add(name=name)
        outcome = _user_records(image, name, changes)
        if not isinstance(outcome, tuple):
            new = [
                u for u in changes.upsertions if (name, u.mechanism) not in image.scram_credentials
            ]
            count = held + len(new) - len(changes.deletions)
            if count > limits.scram_credentials_max:
                outcome = (
                    ErrorCode.POLICY_VIOLATION,
                    f"user {name!r}: the cluster would hold {count} SCRAM credentials, more "
                    f"than {limits.scram_credentials_max}; delete unused ones first",
                )
            else:
                held = count
        if isinstance(outcome, tuple):
            result.error_code, result.error_message = outcome  # type: ignore[assignment]
        else:
            records += outcome
    return ControlResult(records, response)


def _user_records(
    image: MetadataImage, name: str, changes: _UserChanges
) -> list[m.MetadataRecord] | Refusal:
    """The records of one user's changes, or why they are all refused."""
    numbers = [d.mechanism for d in changes.deletions] + [u.mechanism for u in changes.upsertions]
    unknown = [n for n in numbers if n not in scram.MECHANISMS_BY_NUMBER]
    if unknown:
        return (
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            f"user {name!r}: unknown SCRAM mechanism {unknown[0]}; use "
            + " or ".join(scram.MECHANISMS),
        )
    twice = sorted(n for n, count in Counter(numbers).items() if count > 1)
    if twice:
        mechanism = scram.MECHANISMS_BY_NUMBER[twice[0]].name
        return (
            ErrorCode.DUPLICATE_RESOURCE,
            f"user {name!r}: {mechanism} is changed twice in one request; send one change",
        )
    records = []
    for upsertion in changes.upsertions:
        mechanism = scram.MECHANISMS_BY_NUMBER[upsertion.mechanism]
        salt, salted, iterations = upsertion.salt, upsertion.salted_password, upsertion.iterations
        problem = scram.credential_problem(mechanism, name, salt, salted, iterations)
        if problem is not None:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"user {name!r}: {problem}"
        credential = scram.credential_from_salted_password(mechanism, salt, salted, iterations)
        records.append(credential_record(name, credential))
    for deletion in changes.deletions:
        mechanism = scram.MECHANISMS_BY_NUMBER[deletion.mechanism]
        if credential_of(image.scram_credentials, name, mechanism) is None:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"user {name!r} has no {mechanism.name} credential to delete",
            )
        records.append(removal_record(name, mechanism))
    return records


def bootstrap_credentials(
    image: MetadataImage, credentials: Mapping[tuple[str, int], scram.ScramCredential]
) -> ControlResult[list[str]]:
    """The records of the bootstrap file's credentials (user, mechanism number), while the
    cluster holds no credential at all: once it has one, the API owns them, so a credential
    the API replaced or deleted never comes back (Kafka's --add-scram applies once, at format).
    A cluster left with none (every credential deleted) gets the file's again at the next
    change of active controller: how a lost administrator is recovered. The answer names the
    users written, for the log."""
    missing = [] if image.scram_credentials else sorted(credentials)
    return ControlResult(
        [credential_record(name, credentials[(name, n)]) for name, n in missing],
        [f"{name} ({scram.MECHANISMS_BY_NUMBER[n].name})" for name, n in missing],
    )

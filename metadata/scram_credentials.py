"""Users' SCRAM credentials in the metadata image (KIP-554): the records' replay, the snapshot's
records, and the lookup every process's SaslService answers from.

`MetadataImage.scram_credentials` maps (user name, mechanism number) to a
`common.scram.ScramCredential`: what checks a client's proof, never a password. A record must
name a user of 1..255 characters, a known mechanism, a salt of 1..64 bytes, keys as long as the
mechanism's hash, and iterations within Kafka's 4096..16384; a removal of a credential that does
not exist is a no-op (valid history, overtaken).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from samsa.common import scram
from samsa.v1 import metadata_pb2 as m

# (user name, ScramMechanism number) -> the credential.
ScramCredentials = Mapping[tuple[str, int], scram.ScramCredential]


def credential_of(
    credentials: ScramCredentials, name: str, mechanism: scram.Mechanism
) -> scram.ScramCredential | None:
    """`name`'s credential for `mechanism`, or None."""
    return credentials.get((name, mechanism.number))


def credential_from_record(record: m.UserScramCredentialRecord) -> scram.ScramCredential:
    """The credential a record stores; ValueError saying what is wrong with it."""
    mechanism = scram.MECHANISMS_BY_NUMBER.get(record.mechanism)
    if mechanism is None:
        raise ValueError(f"unknown SCRAM mechanism {record.mechanism}")
    for key in (record.stored_key, record.server_key):
        if len(key) != mechanism.digest_bytes:
            raise ValueError(f"a {mechanism.name} key has {mechanism.digest_bytes} bytes")
    problem = scram.credential_problem(
        mechanism, record.name, record.salt, record.stored_key, record.iterations
    )
    if problem is not None:
        raise ValueError(problem)
    return scram.ScramCredential(
        mechanism, record.salt, record.stored_key, record.server_key, record.iterations
    )


def credential_record(name: str, credential: scram.ScramCredential) -> m.MetadataRecord:
    return m.MetadataRecord(
        user_scram_credential=m.UserScramCredentialRecord(
            name=name,
            mechanism=credential.mechanism.number,
            salt=credential.salt,
            stored_key=credential.stored_key,
            server_key=credential.server_key,
            iterations=credential.iterations,
        )
    )


def removal_record(name: str, mechanism: scram.Mechanism) -> m.MetadataRecord:
    return m.MetadataRecord(
        remove_user_scram_credential=m.RemoveUserScramCredentialRecord(
            name=name, mechanism=mechanism.number
        )
    )


def snapshot_records(credentials: ScramCredentials) -> list[m.MetadataRecord]:
    """The records that rebuild `credentials`, by user name, then mechanism (snapshot.py)."""
    return [credential_record(name, credentials[(name, n)]) for name, n in sorted(credentials)]


class ScramReplay:
    """The SCRAM records' part of replay.py's ImageBuilder, which dispatches on the record kind
    and names the error a record that does not fit raises (`record_error`: InvalidBatchError)."""

    scram_credentials: MutableMapping[tuple[str, int], scram.ScramCredential]
    record_error: type[Exception]

    def _user_scram_credential(
        self, record: m.UserScramCredentialRecord, offset: int, _: bool
    ) -> None:
        try:
            credential = credential_from_record(record)
        except ValueError as error:
            raise self.record_error(f"SCRAM credential record at {offset}: {error}") from error
        self.scram_credentials[(record.name, record.mechanism)] = credential

    def _remove_user_scram_credential(
        self, record: m.RemoveUserScramCredentialRecord, offset: int, _: bool
    ) -> None:
        self.scram_credentials.pop((record.name, record.mechanism), None)

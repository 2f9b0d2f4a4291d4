"""Goal: users' SCRAM credentials live in the metadata image as the UserScramCredentialRecords
and RemoveUserScramCredentialRecords of the log say, and a snapshot keeps them.

Method: replay hand-made batches with the real `replay`; check the lookup, that a new
credential replaces the old one of the same (user, mechanism) and leaves the other mechanism's,
that removing an absent credential changes nothing, the refusal of records no credential can be,
and the snapshot round trip.
"""

from __future__ import annotations

import pytest

from samsa.common import scram
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import InvalidBatchError, replay
from samsa.metadata.scram_credentials import credential_of, credential_record, removal_record
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import metadata_pb2 as m

SHA256, SHA512 = scram.SCRAM_SHA_256, scram.SCRAM_SHA_512


def applied(image: MetadataImage, *records: m.MetadataRecord) -> MetadataImage:
    return replay(image, make_batch(image, list(records), 1))


def credential(password: str, mechanism: scram.Mechanism = SHA256) -> scram.ScramCredential:
    return scram.credential_for_password(mechanism, password, b"salt")


def test_records_set_replace_and_remove_credentials() -> None:
    one, two, other = credential("one"), credential("two"), credential("x", SHA512)
    image = applied(
        MetadataImage.empty(), credential_record("alice", one), credential_record("alice", other)
    )
    assert credential_of(image.scram_credentials, "alice", SHA256) == one
    assert credential_of(image.scram_credentials, "alice", SHA512) == other
    assert credential_of(image.scram_credentials, "bob", SHA256) is None
    image = applied(image, credential_record("alice", two), removal_record("alice", SHA512))
    assert credential_of(image.scram_credentials, "alice", SHA256) == two
    assert credential_of(image.scram_credentials, "alice", SHA512) is None
    again = applied(image, removal_record("bob", SHA256))
    assert again.scram_credentials == image.scram_credentials


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"mechanism": 0}, "unknown SCRAM mechanism"),
        ({"name": ""}, "user name"),
        ({"iterations": 10}, "iterations"),
        ({"salt": b""}, "salt"),
        ({"stored_key": b"short"}, "32 bytes"),
        ({"server_key": b"x" * 64}, "32 bytes"),
    ],
)
def test_a_record_no_credential_can_be_refuses_its_batch(change: dict, complaint: str) -> None:
    record = credential_record("alice", credential("one"))
    for field, value in change.items():
        setattr(record.user_scram_credential, field, value)
    with pytest.raises(InvalidBatchError, match=complaint):
        applied(MetadataImage.empty(), record)


def test_a_snapshot_keeps_the_credentials_in_order() -> None:
    image = applied(
        MetadataImage.empty(),
        credential_record("bob", credential("b", SHA512)),
        credential_record("alice", credential("a", SHA512)),
        credential_record("alice", credential("a")),
    )
    snapshot = to_snapshot(image)
    kept = [
        (r.user_scram_credential.name, r.user_scram_credential.mechanism)
        for r in snapshot.records
        if r.HasField("user_scram_credential")
    ]
    assert kept == [("alice", 1), ("alice", 2), ("bob", 2)]
    assert from_snapshot(snapshot) == image

"""Goal: AlterUserScramCredentials commits a credential record per credential set and a removal
per credential deleted, stores only the keys derived from the salted password, refuses a user's
changes all together with Kafka's error (unknown mechanism, a (user, mechanism) named twice, an
unacceptable credential, deleting an absent one) while other users' apply, caps the credentials
the cluster holds; DescribeUserScramCredentials reads them back without keys; the bootstrap
file's credentials are written only where the image has none.

Method: the pure `alter_user_scram_credentials`, `describe_user_scram_credentials` and
`bootstrap_credentials` over images committed with the real replay.
"""

from __future__ import annotations

import pytest
from test_control_plane import commit

from samsa.common import limits, scram
from samsa.common.errors import ErrorCode
from samsa.metadata.image import MetadataImage
from samsa.services.controller.scram_control import (
    alter_user_scram_credentials,
    bootstrap_credentials,
)
from samsa.services.runtime.scram_reads import describe_user_scram_credentials
from samsa.v1 import controller_pb2 as c

SHA256 = scram.SCRAM_SHA_256
SHA512 = scram.SCRAM_SHA_512
Req = c.AlterUserScramCredentialsRequest
SALT = b"s" * 32


def upsert(name: str, mechanism=SHA256, password="pw", iterations=4096, salt=SALT, **fields):
    salted = scram.salted_password(mechanism, password, salt, iterations)
    values = dict(
        name=name,
        mechanism=mechanism.number,
        iterations=iterations,
        salt=salt,
        salted_password=salted,
    )
    return Req.Upsertion(**(values | fields))


def delete(name: str, mechanism=SHA256) -> Req.Deletion:
    return Req.Deletion(name=name, mechanism=mechanism.number)


def alter(image: MetadataImage, deletions=(), upsertions=()):
    request = Req(deletions=list(deletions), upsertions=list(upsertions))
    result = alter_user_scram_credentials(image, request)
    return commit(image, result), result


def outcomes(result) -> dict[str, int]:
    return {r.name: r.error_code for r in result.response.results}


def test_set_stores_the_derived_keys_and_a_proof_checks_against_them() -> None:
    image, result = alter(MetadataImage.empty(), upsertions=[upsert("alice", iterations=8192)])
    assert outcomes(result) == {"alice": ErrorCode.NONE}
    stored = image.scram_credentials[("alice", SHA256.number)]
    assert stored == scram.credential_for_password(SHA256, "pw", SALT, 8192)
    record = result.records[0].user_scram_credential
    salted = scram.salted_password(SHA256, "pw", SALT, 8192)
    assert salted not in record.SerializeToString(), "the salted password is never stored"


def test_a_second_set_replaces_and_delete_removes() -> None:
    image, _ = alter(MetadataImage.empty(), upsertions=[upsert("alice")])
    image, _ = alter(image, upsertions=[upsert("alice", password="new", iterations=5000)])
    assert image.scram_credentials[("alice", SHA256.number)].iterations == 5000
    image, result = alter(image, deletions=[delete("alice")])
    assert outcomes(result) == {"alice": ErrorCode.NONE}
    assert image.scram_credentials == {}


@pytest.mark.parametrize(
    "changes, code",
    [
        ({"upsertions": [Req.Upsertion(name="bob", mechanism=0)]}, "UNSUPPORTED"),
        ({"deletions": [Req.Deletion(name="bob", mechanism=7)]}, "UNSUPPORTED"),
        ({"upsertions": [upsert("bob"), upsert("bob", password="x")]}, "DUPLICATE"),
        ({"deletions": [delete("bob")], "upsertions": [upsert("bob")]}, "DUPLICATE"),
        ({"upsertions": [upsert("bob", iterations=4095)]}, "UNACCEPTABLE"),
        ({"upsertions": [upsert("bob", iterations=16385)]}, "UNACCEPTABLE"),
        ({"upsertions": [upsert("bob", salt=b"")]}, "UNACCEPTABLE"),
        ({"upsertions": [upsert("bob", salt=b"s" * 65)]}, "UNACCEPTABLE"),
        ({"upsertions": [upsert("bob", salted_password=b"x" * 31)]}, "UNACCEPTABLE"),
        ({"upsertions": [upsert("x" * 256)]}, "UNACCEPTABLE"),
        ({"upsertions": [upsert("")]}, "UNACCEPTABLE"),
        ({"deletions": [delete("bob", SHA512)]}, "NOT_FOUND"),
    ],
)
def test_each_refusal_refuses_the_users_changes_and_keeps_the_others(changes, code) -> None:
    expected = {
        "UNSUPPORTED": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "DUPLICATE": ErrorCode.DUPLICATE_RESOURCE,
        "UNACCEPTABLE": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "NOT_FOUND": ErrorCode.RESOURCE_NOT_FOUND,
    }[code]
    image, _ = alter(MetadataImage.empty(), upsertions=[upsert("bob", SHA256, "old")])
    deletions = list(changes.get("deletions", ()))
    # carol, named in the same request, is answered and applied on her own.
    upsertions = list(changes.get("upsertions", ()))
    other = upsert("carol")
    after, result = alter(image, deletions, [*upsertions, other])
    name = (deletions or upsertions)[0].name
    assert outcomes(result)[name] == expected
    assert result.response.results[0].error_message, "a refusal says what to fix"
    assert outcomes(result)["carol"] == ErrorCode.NONE
    assert ("carol", SHA256.number) in after.scram_credentials
    assert {k: v for k, v in after.scram_credentials.items() if k[0] != "carol"} == {
        k: v for k, v in image.scram_credentials.items()
    }, "nothing of the refused user changed"


def test_a_user_is_all_or_nothing_across_mechanisms() -> None:
    image, _ = alter(MetadataImage.empty(), upsertions=[upsert("dan", SHA512)])
    after, result = alter(
        image,
        deletions=[delete("dan", SHA512)],
        upsertions=[upsert("dan", SHA256, iterations=1)],
    )
    assert outcomes(result) == {"dan": ErrorCode.UNACCEPTABLE_CREDENTIAL}
    assert result.records == []
    assert after.scram_credentials == image.scram_credentials, "the deletion did not apply"


def test_results_follow_the_order_users_are_first_named() -> None:
    _, result = alter(
        MetadataImage.empty(),
        deletions=[delete("zed")],
        upsertions=[upsert("amy"), upsert("zed", SHA512)],
    )
    assert [r.name for r in result.response.results] == ["zed", "amy"]


def test_the_cluster_holds_at_most_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "scram_credentials_max", 2)
    image, _ = alter(MetadataImage.empty(), upsertions=[upsert("a"), upsert("b")])
    after, result = alter(
        image,
        upsertions=[upsert("a", password="again"), upsert("c")],
    )
    assert outcomes(result) == {"a": ErrorCode.NONE, "c": ErrorCode.POLICY_VIOLATION}
    assert "more than 2" in result.response.results[1].error_message
    # A deletion in the same request makes room for a later user's credential.
    after, result = alter(after, deletions=[delete("b")], upsertions=[upsert("c")])
    assert outcomes(result) == {"b": ErrorCode.NONE, "c": ErrorCode.NONE}
    assert sorted(after.scram_credentials) == [("a", 1), ("c", 1)]


def test_describe_lists_mechanisms_and_iterations_never_keys() -> None:
    image, _ = alter(
        MetadataImage.empty(),
        upsertions=[upsert("bob", SHA512, iterations=8192), upsert("bob"), upsert("amy")],
    )
    every = describe_user_scram_credentials(
        image.scram_credentials, c.DescribeUserScramCredentialsRequest()
    )
    assert [r.name for r in every.results] == ["amy", "bob"]
    assert [(i.mechanism, i.iterations) for i in every.results[1].credentials] == [
        (1, 4096),
        (2, 8192),
    ]
    assert SALT not in every.SerializeToString()
    named = describe_user_scram_credentials(
        image.scram_credentials,
        c.DescribeUserScramCredentialsRequest(users=["bob", "nobody", "amy", "amy"]),
    )
    assert [(r.name, r.error_code) for r in named.results] == [
        ("bob", ErrorCode.NONE),
        ("nobody", ErrorCode.RESOURCE_NOT_FOUND),
        ("amy", ErrorCode.DUPLICATE_RESOURCE),
    ]
    assert all(r.error_message for r in named.results[1:])


def test_bootstrap_writes_the_files_credentials_only_into_a_cluster_without_any() -> None:
    from_file = {
        ("admin", 1): scram.credential_for_password(SHA256, "boot", SALT),
        ("admin", 2): scram.credential_for_password(SHA512, "boot", SALT),
    }
    result = bootstrap_credentials(MetadataImage.empty(), from_file)
    assert result.response == ["admin (SCRAM-SHA-256)", "admin (SCRAM-SHA-512)"]
    after = commit(MetadataImage.empty(), result)
    assert dict(after.scram_credentials) == from_file
    assert bootstrap_credentials(after, from_file).records == []
    # A cluster with any credential is the API's: a changed password or a deleted user stays so.
    image, _ = alter(MetadataImage.empty(), upsertions=[upsert("other", password="x")])
    assert bootstrap_credentials(image, from_file).records == []

"""Goal: a membership proof is accepted only from a holder of the cluster secret, for the very call,
member and moment it was made for, and every refusal says why.

Method: sign with the pure module and verify it back, then change one thing at a time (key,
method, member id, timestamp, the header's text) and check the refusal's reason; hypothesis tries
arbitrary header text, which must never raise. The gRPC adapter's `require_member` is driven with
a fake servicer context to check the status code and the message a caller sees.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.common import limits
from samsa.services.runtime import member_auth, membership

KEY = membership.derive_key("a" * 43)
OTHER_KEY = membership.derive_key("b" * 43)
FETCH = "/samsa.v1.BrokerService/Fetch"
ALTER = "/samsa.v1.ControllerService/AlterPartition"
NOW = 1_700_000_000_000
NONCE = "0123456789abcdef"


def proof(key: bytes = KEY, method: str = FETCH, member: int = 2, at: int = NOW) -> str:
    return membership.sign(key, method, member, at, NONCE)


def test_a_good_proof_is_accepted() -> None:
    assert membership.verify(KEY, proof(), FETCH, 2, NOW) is None
    assert membership.verify(KEY, proof(member=0), FETCH, 0, NOW + 59_000) is None


def test_the_key_is_derived_not_the_secret_itself() -> None:
    secret = "s" * 43
    key = membership.derive_key(secret)
    assert len(key) == 32 and key != secret.encode()
    assert membership.verify(secret.encode(), proof(key=key), FETCH, 2, NOW) is not None


@pytest.mark.parametrize(
    ("header", "method", "member", "now", "reason"),
    [
        (proof(key=OTHER_KEY), FETCH, 2, NOW, "another cluster secret"),
        (proof(method=ALTER), FETCH, 2, NOW, "for another call"),
        (proof(member=3), FETCH, 2, NOW, "the proof is for member 3, the request claims 2"),
        (proof(at=NOW - 60_001), FETCH, 2, NOW, "60001 ms old"),
        (proof(at=NOW + 60_001), FETCH, 2, NOW, "60001 ms in the future"),
        ("garbage", FETCH, 2, NOW, "is not v1.<member id>"),
        (proof().replace("v1.", "v2.", 1), FETCH, 2, NOW, "is not v1."),
        (proof().upper(), FETCH, 2, NOW, "is not v1."),
        (proof() + "0", FETCH, 2, NOW, "is not v1."),
        ("v1." + "9" * 300, FETCH, 2, NOW, f"at most {limits.member_auth_header_length_max}"),
    ],
)
def test_a_bad_proof_is_refused_with_its_reason(
    header: str, method: str, member: int, now: int, reason: str
) -> None:
    error = membership.verify(KEY, header, method, member, now)
    assert error is not None and not error.missing
    assert reason in str(error)


def test_a_tampered_mac_or_nonce_is_refused() -> None:
    good = proof()
    flipped = good[:-1] + ("0" if good[-1] != "0" else "1")
    assert "does not verify" in str(membership.verify(KEY, flipped, FETCH, 2, NOW))
    other_nonce = good.replace(NONCE, "f" * 16)
    assert "does not verify" in str(membership.verify(KEY, other_nonce, FETCH, 2, NOW))


def test_a_missing_proof_is_reported_as_missing() -> None:
    for header in (None, ""):
        error = membership.verify(KEY, header, FETCH, 2, NOW)
        assert error is not None and error.missing
        assert membership.METADATA_KEY in str(error)


def test_verify_any_accepts_any_members_proof_and_nothing_else() -> None:
    """For calls that claim no member id (a coordinator's Produce to an internal topic)."""
    for member in (0, 2, 7):
        assert membership.verify_any(KEY, proof(member=member), FETCH, NOW) is None
    refused = [
        (proof(key=OTHER_KEY), "another cluster secret"),
        (proof(method=ALTER), "for another call"),
        (proof(at=NOW - 60_001), "60001 ms old"),
        ("garbage", "is not v1.<member id>"),
    ]
    for header, reason in refused:
        error = membership.verify_any(KEY, header, FETCH, NOW)
        assert error is not None and not error.missing and reason in str(error)
    for header in (None, ""):
        error = membership.verify_any(KEY, header, FETCH, NOW)
        assert error is not None and error.missing


def test_sign_refuses_a_bad_nonce() -> None:
    with pytest.raises(ValueError, match="nonce"):
        membership.sign(KEY, FETCH, 2, NOW, "short")


@given(st.text(max_size=400))
def test_any_header_text_is_refused_without_raising(header: str) -> None:
    assert membership.verify(KEY, header, FETCH, 2, NOW) is not None


class FakeContext:
    """The two methods of grpc.aio.ServicerContext that require_member uses."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.metadata = metadata
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise RuntimeError("aborted")


def check(metadata: tuple[tuple[str, str], ...], member: int) -> tuple[grpc.StatusCode, str] | None:
    context = FakeContext(metadata)
    what = f"Fetch with replica_id={member}"
    with contextlib.suppress(RuntimeError):
        asyncio.run(member_auth.require_member(context, KEY, FETCH, member, what))  # type: ignore[arg-type]
    return context.aborted


def test_require_member_accepts_the_signers_metadata() -> None:
    signer = member_auth.MemberSigner(KEY, 2)
    assert check(signer.metadata(FETCH), 2) is None
    assert signer.metadata(FETCH) != signer.metadata(FETCH), "a fresh nonce per call"


def test_require_member_aborts_permission_denied_saying_what_is_missing() -> None:
    assert check((), 2) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "Fetch with replica_id=2 must carry the cluster's membership proof (samsa-member-auth "
        "metadata); brokers get it from --secret-file",
    )
    code, message = check(member_auth.MemberSigner(OTHER_KEY, 2).metadata(FETCH), 2) or (None, "")
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert message.startswith("Fetch with replica_id=2: the cluster's membership proof is refused")
    assert "another cluster secret" in message
    code, message = check(member_auth.MemberSigner(KEY, 3).metadata(FETCH), 2) or (None, "")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "for member 3" in message

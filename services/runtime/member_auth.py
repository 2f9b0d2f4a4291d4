"""The gRPC side of membership proofs (membership.py): signing outgoing calls, checking incoming.

- `MemberSigner` gives a broker's outgoing calls their `samsa-member-auth` metadata: a fresh
  timestamp and nonce per call (and per retry), so a proof is never reused;
- `require_member` is the one line a servicer method that acts as a member starts with: it reads
  the proof from the call's metadata, verifies it against the member id the request claims, and
  aborts PERMISSION_DENIED with a message saying what is missing. Cost: one HMAC-SHA256.
"""

from __future__ import annotations

import secrets
import time

import grpc

from samsa.services.runtime import membership

# 8 random bytes per proof (64 bits): no two proofs of one member share a signed string.
NONCE_BYTES = 8


def _now_ms() -> int:
    return int(time.time() * 1000)


class MemberSigner:
    """Signs calls as cluster member `member_id` with the cluster's membership key."""

    def __init__(self, key: bytes, member_id: int) -> None:
        self.key = key
        self.member_id = member_id

    def metadata(self, method: str) -> tuple[tuple[str, str], ...]:
        """gRPC metadata for one call to `method` (its path, "/samsa.v1.Service/Method")."""
        proof = membership.sign(
            self.key, method, self.member_id, _now_ms(), secrets.token_hex(NONCE_BYTES)
        )
        return ((membership.METADATA_KEY, proof),)


def proof_in(context: grpc.aio.ServicerContext) -> str | None:
    """The call's `samsa-member-auth` value, if it sent one."""
    for key, value in context.invocation_metadata() or ():
        if key == membership.METADATA_KEY:
            return value if isinstance(value, str) else None
    return None


async def require_member(
    context: grpc.aio.ServicerContext, key: bytes, method: str, member_id: int, what: str
) -> None:
    """Abort PERMISSION_DENIED unless the call proves it comes from cluster member `member_id`.

    `what` names the call for the message, e.g. "Fetch with replica_id=2".
    """
    error = membership.verify(key, proof_in(context), method, member_id, _now_ms())
    if error is None:
        return
    if error.missing:
        message = (
            f"{what} must carry the cluster's membership proof ({membership.METADATA_KEY} "
            "metadata); brokers get it from --secret-file"
        )
    else:
        message = f"{what}: the cluster's membership proof is refused: {error}"
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, message)

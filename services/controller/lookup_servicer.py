"""The controller's check of coordinators' proofs.

- `require_coordinator` is the first line of the ControllerService methods a coordinator calls
  (RegisterCoordinator, CoordinatorHeartbeat): the call must carry the cluster's membership proof
  signed as the coordinator id it claims, exactly as brokers sign theirs.

FindCoordinator, which this module served once, is answered by every service now: see
`samsa.services.runtime.coordinator_lookup`.
"""

from __future__ import annotations

import time

import grpc

from samsa.services.runtime import member_auth, membership


def _now_ms() -> int:
    return int(time.time() * 1000)


async def require_coordinator(
    context: grpc.aio.ServicerContext,
    key: bytes,
    method_path: str,
    coordinator_id: int,
    method: str,
) -> None:
    """Abort PERMISSION_DENIED unless the call to `method_path` proves it comes from coordinator
    `coordinator_id`, with a message saying what to fix."""
    error = membership.verify(
        key, member_auth.proof_in(context), method_path, coordinator_id, _now_ms()
    )
    if error is None:
        return
    what = f"{method} as coordinator_id={coordinator_id}"
    if error.missing:
        message = (
            f"{what} must carry the cluster's membership proof ({membership.METADATA_KEY} "
            "metadata); coordinators get it from --secret-file"
        )
    else:
        message = f"{what}: the cluster's membership proof is refused: {error}"
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, message)

"""Goal: a client the SASL gate admitted counts for its SASL user in the user quotas, ahead of
the TLS certificate its connection may also present; without SASL, the certificate's subject.

Method: QuotaThrottle.identity on a stand-in call context, inside a context where the gate's
SASL_PRINCIPAL is set (as the gate sets it for the call) and outside it.
"""

from __future__ import annotations

import contextvars

from samsa.services.broker.requests.quota_throttle import Identity, QuotaThrottle
from samsa.services.runtime.sasl_gate import SASL_PRINCIPAL


class CallContext:
    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_subject": [b"CN=svc,O=samsa"]}

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("samsa-client-id", "app"),)


def sasl_identity() -> Identity:
    SASL_PRINCIPAL.set("User:alice")
    return QuotaThrottle(None).identity(CallContext())  # type: ignore[arg-type]


def test_the_sasl_user_counts_ahead_of_the_certificate() -> None:
    assert contextvars.copy_context().run(sasl_identity).user == "alice"
    assert QuotaThrottle(None).identity(CallContext()).user == "CN=svc,O=samsa"  # type: ignore[arg-type]

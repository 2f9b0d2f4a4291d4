"""The identity provider's JWKS on a process that enables OAUTHBEARER: fetched from
sasl.oauthbearer.jwks.endpoint.url (file://, http://, https://), kept, fetched again, and used to
validate tokens (common/jwt_validation.py, pure).

Theory of operation. `start` fetches the JWKS once before the process listens: a URL that cannot
be read, or a document without a usable key, stops the process with a message naming the key
(a typo must not leave every OAuth login failing). After that the keys are fetched again
- when they are older than sasl.oauthbearer.jwks.endpoint.refresh.ms, by the first validation
  that finds them so (no background task: an idle process fetches nothing), and
- when a token names a key id the JWKS does not hold (the provider rotated its keys), at most
  once per limits.oauthbearer_jwks_refetch_ms_min, so made-up key ids cannot make the process
  hammer the provider.
A fetch that fails later keeps the keys held (logged): a provider briefly down does not stop
logins with tokens signed by keys already known. Every fetch runs on a thread (asyncio.to_thread),
one at a time (a lock), never on the event loop; its answer is read up to
limits.oauthbearer_jwks_bytes_max and must come within FETCH_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.request
from urllib.parse import unquote, urlsplit

from samsa.common import jwt_validation, limits
from samsa.common.jwt_validation import Jwk, JwtError, UnknownKeyError, Validated
from samsa.services.runtime.sasl_oauthbearer import OAuthBearerSettings
from samsa.services.runtime.server import ServerStartError

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
REFETCH_MS_MIN = limits.oauthbearer_jwks_refetch_ms_min
URL_KEY = "sasl.oauthbearer.jwks.endpoint.url"


class JwksStartError(ServerStartError):
    """The JWKS could not be fetched at start: the process does not start."""


def fetch(url: str) -> bytes:
    """The document at `url`, at most JWKS_BYTES_MAX bytes; OSError or JwtError otherwise."""
    parts = urlsplit(url)
    limit = jwt_validation.JWKS_BYTES_MAX
    if parts.scheme.lower() == "file":
        with open(unquote(parts.path), "rb") as file:
            data = file.read(limit + 1)
    else:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as answer:
            data = answer.read(limit + 1)
    if len(data) > limit:
        raise JwtError(f"the JWKS is larger than {limit} bytes")
    return data


def _now_ms() -> float:
    return time.monotonic() * 1000


class JwksSource:
    """The JWKS `settings` name, and token validation against it."""

    def __init__(self, settings: OAuthBearerSettings) -> None:
        self.settings = settings
        self._keys: dict[str, Jwk] = {}
        self._fetched_ms = -float("inf")  # when the keys were last fetched (monotonic)
        self._tried_ms = -float("inf")  # when a fetch was last tried, whatever its outcome
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Fetch the JWKS before the process serves; JwksStartError when it cannot."""
        try:
            self._keys = await asyncio.to_thread(self._fetch_keys)
        except (OSError, ValueError) as error:
            raise JwksStartError(
                f"{URL_KEY}={self.settings.jwks_url}: cannot load the JWKS ({error}); set it "
                "to the identity provider's JWKS (a file://, http:// or https:// URL)"
            ) from None
        self._fetched_ms = self._tried_ms = _now_ms()
        log.info("JWKS loaded", extra={"url": self.settings.jwks_url, "keys": len(self._keys)})

    async def validate(self, token: str) -> Validated:
        """The token's principal and expiry; JwtError saying why it is refused."""
        if _now_ms() - self._fetched_ms >= self.settings.refresh_ms:
            await self._refresh(since_ms=self.settings.refresh_ms)
        try:
            return self._validate(token)
        except UnknownKeyError:
            if not await self._refresh(since_ms=REFETCH_MS_MIN):
                raise
        return self._validate(token)

    def _validate(self, token: str) -> Validated:
        return jwt_validation.validate(token, self._keys, self.settings.expect, time.time())

    async def _refresh(self, since_ms: float) -> bool:
        """Fetch again unless a fetch was tried within `since_ms`; whether new keys came."""
        async with self._lock:
            if _now_ms() - self._tried_ms < since_ms:
                return False
            self._tried_ms = _now_ms()
            try:
                keys = await asyncio.to_thread(self._fetch_keys)
            except (OSError, ValueError) as error:
                log.warning(
                    "cannot fetch the JWKS again; keeping the %d keys held: %s",
                    len(self._keys),
                    error,
                )
                return False
            self._keys, self._fetched_ms = keys, _now_ms()
            return True

    def _fetch_keys(self) -> dict[str, Jwk]:
        return jwt_validation.parse_jwks(fetch(self.settings.jwks_url))

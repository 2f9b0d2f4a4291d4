"""SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512): the math, the credential a
server stores, and both sides of the exchange. Pure: no I/O; nonces and salts come from the
caller, so that the exchange is tested against the RFC's vectors.

Theory of operation. A user's password never reaches a server. The client salts it
(SaltedPassword = PBKDF2-HMAC(password, salt, iterations)), and what the cluster stores is
derived from that: StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"), enough to check a proof but not to make one. One exchange:

    client-first  n,,n=<user>,r=<client nonce>
    server-first  r=<client nonce><server nonce>,s=<salt, base64>,i=<iterations>
    client-final  c=biws,r=<both nonces>,p=<ClientKey XOR HMAC(StoredKey, AuthMessage)>
    server-final  v=<HMAC(ServerKey, AuthMessage)>

where AuthMessage is client-first without its header, server-first and client-final without
its proof, joined by commas. The server recovers ClientKey from the proof and checks that its
hash is StoredKey; the client checks the server's signature, which only a holder of the
credential can make. No channel binding (Kafka has none): the header must be "n" or "y".

A server asked for a user it does not know answers server-first as for a known one, with a
salt derived from the user name and a key of its own (`decoy_key`), and fails the final step
with the same error as a wrong password: the exchange does not tell who has an account.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from samsa.common import limits

# The bounds, and why (common/limits.py).
ITERATIONS_MIN = limits.scram_iterations_min
ITERATIONS_MAX = limits.scram_iterations_max
SALT_BYTES_MAX = limits.scram_salt_bytes_max
SALT_BYTES_DEFAULT = 32  # as Kafka's clients make them
USER_NAME_CHARS_MAX = limits.scram_user_name_length_max
MESSAGE_BYTES_MAX = limits.scram_message_bytes_max


class ScramError(ValueError):
    """The exchange cannot go on; the message says why (for the log, not for the client)."""


@dataclass(frozen=True)
class Mechanism:
    """One SCRAM mechanism: its SASL name, its hash, and its number in the proto."""

    name: str
    hash_name: str
    number: int

    @property
    def digest_bytes(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()


SCRAM_SHA_256 = Mechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = Mechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_NUMBER: dict[int, Mechanism] = {m.number: m for m in MECHANISMS.values()}


def mechanism_named(name: str) -> Mechanism:
    """The mechanism called `name` (case-insensitive), or ScramError listing the known ones."""
    found = MECHANISMS.get(name.strip().upper())
    if found is None:
        raise ScramError(
            f"unknown SASL mechanism {name!r}: expected one of {', '.join(MECHANISMS)}"
        )
    return found


@dataclass(frozen=True)
class ScramCredential:
    """What a server keeps of one user's password for one mechanism."""

    mechanism: Mechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def fingerprint(self) -> bytes:
        """8 bytes that change whenever the credential does (a new password or salt): a
        session ticket carries them, so that replacing a credential ends its sessions."""
        return hashlib.sha256(
            self.mechanism.name.encode() + self.salt + self.stored_key + self.server_key
        ).digest()[:8]


def salted_password(mechanism: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with the mechanism's HMAC. The password is
    taken as UTF-8, as Kafka's clients do (no SASLprep)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_problem(
    mechanism: Mechanism, name: str, salt: bytes, salted: bytes, iterations: int
) -> str | None:
    """Why a credential to store is unacceptable, or None: the controller's check."""
    if not name or len(name) > USER_NAME_CHARS_MAX:
        return f"a user name has 1 to {USER_NAME_CHARS_MAX} characters, not {len(name)}"
    if not ITERATIONS_MIN <= iterations <= ITERATIONS_MAX:
        return (
            f"iterations must be {ITERATIONS_MIN} to {ITERATIONS_MAX} for {mechanism.name}, "
            f"not {iterations}"
        )
    if not 1 <= len(salt) <= SALT_BYTES_MAX:
        return f"a salt has 1 to {SALT_BYTES_MAX} bytes, not {len(salt)}"
    if len(salted) != mechanism.digest_bytes:
        return (
            f"a {mechanism.name} salted password has {mechanism.digest_bytes} bytes, "
            f"not {len(salted)}"
        )
    return None


def credential_from_salted_password(
    mechanism: Mechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The keys a server stores, from the salted password a client sends (KIP-554)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        mechanism=mechanism,
        salt=salt,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def credential_for_password(
    mechanism: Mechanism, password: str, salt: bytes, iterations: int = ITERATIONS_MIN
) -> ScramCredential:
    """The stored credential for `password` (tests and tools; clients send the salted one)."""
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def escape_name(name: str) -> str:
    """A user name as SCRAM writes it: '=' as '=3D', ',' as '=2C'."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    """The inverse of escape_name; ScramError for an '=' that escapes nothing."""
    if "=" in text.replace("=3D", "").replace("=2C", ""):
        raise ScramError(f"bad user name {text!r}: '=' must be written =3D or =2C")
    return text.replace("=2C", ",").replace("=3D", "=")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError(f"{what} is not base64") from None


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def _text(message: bytes, what: str) -> str:
    if len(message) > MESSAGE_BYTES_MAX:
        raise ScramError(f"{what} of {len(message)} bytes, over {MESSAGE_BYTES_MAX}")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"{what} is not UTF-8") from None


def _attributes(text: str, expected: str, what: str) -> list[str]:
    """The values of `text`'s comma-separated `k=v` attributes, whose keys must be `expected`
    in order (extensions after them are refused: SCRAM defines none we know)."""
    parts = text.split(",")
    if len(parts) != len(expected):
        raise ScramError(f"{what} {text!r}: expected the attributes {','.join(expected)}")
    values = []
    for part, key in zip(parts, expected, strict=True):
        if not part.startswith(key + "="):
            raise ScramError(f"{what} {text!r}: expected {key}= where it has {part[:2]!r}")
        values.append(part[2:])
    return values


def _check_nonce(nonce: str, what: str) -> None:
    if not nonce or any(not 0x21 <= ord(c) <= 0x7E or c == "," for c in nonce):
        raise ScramError(f"{what} must be printable ASCII without ','")


class ScramClient:
    """The client's side of one exchange."""

    def __init__(self, mechanism: Mechanism, user: str, password: str, nonce: str) -> None:
        _check_nonce(nonce, "the client nonce")
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce
        self._first_bare = f"n={escape_name(user)},r={nonce}"
        self._auth_message: bytes | None = None
        self._salted: bytes | None = None

    def client_first(self) -> bytes:
        return ("n,," + self._first_bare).encode("utf-8")

    def client_final(self, server_first: bytes) -> bytes:
        """The proof, from the server's nonce, salt and iterations; ScramError for a server
        message that does not extend our nonce or asks for too few iterations."""
        text = _text(server_first, "server-first message")
        nonce, salt_text, iterations_text = _attributes(text, "rsi", "server-first message")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("the server's nonce does not extend the client's")
        _check_nonce(nonce, "the server nonce")
        salt = _unb64(salt_text, "the salt")
        if not iterations_text.isdigit() or int(iterations_text) < ITERATIONS_MIN:
            raise ScramError(f"the server asks for {iterations_text!r} iterations")
        salted = salted_password(self.mechanism, self._password, salt, int(iterations_text))
        without_proof = f"c=biws,r={nonce}"
        auth = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth)
        self._auth_message, self._salted = auth, salted
        return f"{without_proof},p={_b64(_xor(client_key, signature))}".encode()

    def check_server_final(self, server_final: bytes) -> None:
        """ScramError unless the server proved it holds the user's credential."""
        if self._auth_message is None or self._salted is None:
            raise ScramError("server-final before client-final")
        text = _text(server_final, "server-final message")
        if text.startswith("e="):
            raise ScramError(f"the server refused: {text[2:]}")
        (signature_text,) = _attributes(text, "v", "server-final message")
        server_key = self.mechanism.hmac(self._salted, b"Server Key")
        expected = self.mechanism.hmac(server_key, self._auth_message)
        if not hmac.compare_digest(expected, _unb64(signature_text, "the server signature")):
            raise ScramError("the server's signature is wrong: it does not hold the credential")


class ScramServer:
    """The server's side of one exchange, over the credentials `credential_of` looks up."""

    def __init__(
        self,
        mechanism: Mechanism,
        credential_of: Callable[[str], ScramCredential | None],
        nonce: str,
        decoy_key: bytes,
    ) -> None:
        _check_nonce(nonce, "the server nonce")
        self.mechanism = mechanism
        self._credential_of = credential_of
        self._server_nonce = nonce
        self._decoy_key = decoy_key
        self.user: str | None = None  # set once the client's proof checked out
        self.credential: ScramCredential | None = None
        self._candidate = ""  # the user the client names, until its proof checks out
        self._header = ""  # the client-first's gs2 header, which the channel binding repeats
        self._first_bare: str | None = None
        self._server_first: str | None = None
        self._known = False

    def server_first(self, client_first: bytes) -> bytes:
        text = _text(client_first, "client-first message")
        header, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or header not in ("n", "y"):
            raise ScramError(
                f"client-first message must start with 'n,,' (no channel binding): {text[:16]!r}"
            )
        name_text, nonce = _attributes(bare, "nr", "client-first message")
        name = unescape_name(name_text)
        if not name or len(name) > USER_NAME_CHARS_MAX:
            raise ScramError(f"a user name has 1 to {USER_NAME_CHARS_MAX} characters")
        if authzid and unescape_name(authzid.removeprefix("a=")) != name:
            raise ScramError(f"authorization id {authzid!r} is not the user {name!r}")
        _check_nonce(nonce, "the client nonce")
        credential = self._credential_of(name)
        self._known = credential is not None and credential.mechanism == self.mechanism
        if credential is None or not self._known:
            credential = self._decoy(name)
        self.credential, self._first_bare = credential, bare
        self._candidate = name
        self._header = f"{header},{authzid},"
        self._server_first = (
            f"r={nonce}{self._server_nonce},s={_b64(credential.salt)},i={credential.iterations}"
        )
        return self._server_first.encode("utf-8")

    def server_final(self, client_final: bytes) -> bytes:
        """The server's signature once the client's proof checks out; ScramError otherwise
        (with the same message for an unknown user as for a wrong password)."""
        if self._server_first is None or self.credential is None:
            raise ScramError("client-final before client-first")
        text = _text(client_final, "client-final message")
        binding, nonce, proof_text = _attributes(text, "crp", "client-final message")
        if _unb64(binding, "the channel binding") != self._header.encode("utf-8"):
            raise ScramError("the channel binding does not repeat the client-first header")
        if nonce != self._server_first[2:].split(",", 1)[0]:
            raise ScramError("the nonce is not the one the server answered")
        proof = _unb64(proof_text, "the proof")
        without_proof = text[: text.rindex(",p=")]
        auth = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        credential = self.credential
        signature = self.mechanism.hmac(credential.stored_key, auth)
        if len(proof) != len(signature):
            raise ScramError("invalid credentials")
        client_key = _xor(proof, signature)
        matches = hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key)
        if not (matches and self._known):
            raise ScramError("invalid credentials")
        self.user = self._candidate
        return f"v={_b64(self.mechanism.hmac(credential.server_key, auth))}".encode()

    def _decoy(self, name: str) -> ScramCredential:
        """A stand-in for a user without a credential: stable per name, so that asking twice
        shows the same salt, and matching no password."""
        seed = hmac.new(self._decoy_key, name.encode("utf-8"), "sha256").digest()
        keys = self.mechanism.hmac(seed, b"decoy")
        return ScramCredential(self.mechanism, seed, keys, keys, ITERATIONS_MIN)

"""When a service takes a rotated certificate, and when it refuses one: the pure core of TLS
file reloading (services/runtime/certificate_watch.py does the stat calls, the reads, the
logging and the grpc credentials).

Theory of operation. A service serves with one set of files: the certificate chain, its key
and the CA bundle its ssl.* settings name (`FileSet`). An operator rotates them by replacing
the files (Kafka's KIP-226 does the same with a keystore, through a config change). The
adapter looks at the files' stamps (inode, size, modification time) at most once per
`CHECK_INTERVAL_S`, whenever a handshake or a dial asks (`Reloader.due`), and reads them only
when the stamps differ from the last ones it read (`Reloader.needs_read`), so that a handshake
costs three stat calls at most once a second and no read. What it read is offered
(`Reloader.offer`), and the answer is one of three:

- keep (None): the same bytes as the set being served (a file touched, or put back);
- `Take`: a set that loads (PEM, a certificate chain, a private key whose public key is the
  certificate's, a CA bundle that parses): it is served from now on, and the generation
  counter moves so that every listener's credentials pick it up once;
- `Refuse`: a set that does not load (unreadable, not PEM, over the size bound, a key that is
  not the certificate's): the old set stays. The stamps it was read at are remembered, so the
  error is said once per change, not at every handshake. A rotation caught half-way (the
  certificate replaced, not yet its key) is this case, and the next stamps (the key written)
  are read again and taken.

The clock is the caller's (`now`, in seconds), so the core is deterministic and tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from samsa.common.tls import CA_LOCATION, CERTIFICATE_LOCATION, KEY_LOCATION, TlsConfigError

# How often at most a service stats its TLS files: a rotation is seen within a second, and a
# burst of handshakes costs one stat of each file per second, not one per handshake.
CHECK_INTERVAL_S = 1.0

# A file's stamp: (inode, size, modification time in ns); None when it cannot be stat'ed. A
# rename over the file changes the inode, an in-place write the size or the time.
Stamp = tuple[int, int, int] | None


@dataclass(frozen=True)
class FileSet:
    """The contents of a service's TLS files (ca: None when ssl.ca.location is not set)."""

    certificate: bytes
    key: bytes = field(repr=False)  # a private key: in no log line
    ca: bytes | None = None


@dataclass(frozen=True)
class CertificateSummary:
    """What a log line says of a certificate: enough to tell the rotated one from the old."""

    subject: str
    serial: int
    not_after: str

    def __str__(self) -> str:
        return f"subject {self.subject}, serial {self.serial:x}, notAfter {self.not_after}"


@dataclass(frozen=True)
class Take:
    """Serve `files` from now on."""

    files: FileSet
    summary: CertificateSummary


@dataclass(frozen=True)
class Refuse:
    """Keep serving the old files; `reason` says what is wrong with the new ones and the fix."""

    reason: str


def check(files: FileSet) -> CertificateSummary:
    """The leaf certificate's summary when `files` can be served, else TlsConfigError naming the
    setting whose file is wrong and what to do. Checked here rather than left to gRPC, which
    would only fail handshakes, with no word of why."""
    try:
        chain = x509.load_pem_x509_certificates(files.certificate)
    except ValueError as error:
        raise TlsConfigError(
            f"{CERTIFICATE_LOCATION}: not a PEM certificate chain ({error}); write the "
            "certificate and its intermediates, PEM"
        ) from None
    try:
        key = serialization.load_pem_private_key(files.key, password=None)
    except (ValueError, TypeError) as error:
        raise TlsConfigError(
            f"{KEY_LOCATION}: not an unencrypted PEM private key ({error}); write the key "
            "issued with the certificate, unencrypted"
        ) from None
    leaf = chain[0]
    if _public(leaf.public_key()) != _public(key.public_key()):
        raise TlsConfigError(
            f"{KEY_LOCATION}: the key does not match the certificate in {CERTIFICATE_LOCATION} "
            f"(serial {leaf.serial_number:x}): write the key issued with this certificate "
            "(if the rotation is half-way, finish it: the next good pair is taken)"
        )
    if files.ca is not None:
        try:
            x509.load_pem_x509_certificates(files.ca)
        except ValueError as error:
            raise TlsConfigError(
                f"{CA_LOCATION}: not a PEM bundle of CA certificates ({error})"
            ) from None
    return CertificateSummary(
        leaf.subject.rfc4514_string(),
        leaf.serial_number,
        leaf.not_valid_after_utc.isoformat(),
    )


def _public(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


class Reloader:
    """The files a service serves and what it last saw of them (module docstring). Not
    thread-safe: the adapter calls it under its lock."""

    def __init__(
        self,
        files: FileSet,
        stamps: tuple[Stamp, ...],
        now: float,
        interval_s: float = CHECK_INTERVAL_S,
    ) -> None:
        self.serving = files
        self.generation = 0  # moves at each Take: each listener's credentials follow it
        self._seen = stamps  # the stamps of the last files read, taken or refused
        self._checked_at = now
        self._interval_s = interval_s

    def due(self, now: float) -> bool:
        """Whether to stat the files now (at most once per interval); a True starts the next
        interval."""
        if now - self._checked_at < self._interval_s:
            return False
        self._checked_at = now
        return True

    def needs_read(self, stamps: tuple[Stamp, ...]) -> bool:
        """Whether the files changed since they were last read."""
        return stamps != self._seen

    def offer(
        self, stamps: tuple[Stamp, ...], candidate: FileSet | TlsConfigError
    ) -> Take | Refuse | None:
        """What to do with the files read at `stamps` (or the error reading them gave)."""
        self._seen = stamps
        if isinstance(candidate, TlsConfigError):
            return Refuse(str(candidate))
        if candidate == self.serving:
            return None
        try:
            summary = check(candidate)
        except TlsConfigError as error:
            return Refuse(str(error))
        self.serving = candidate
        self.generation += 1
        return Take(candidate, summary)

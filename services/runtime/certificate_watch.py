"""A service's TLS files, watched: rotated certificates are served without a restart.

Theory of operation. `CertificateWatch` holds the files a service serves and dials with and a
pure `Reloader` (common/tls_reload.py) that decides when to look at them again and whether to
take what it finds. It is asked from two places:

- every listener's credentials are grpc.dynamic_ssl_server_credentials, whose fetcher gRPC
  calls before each new TLS handshake, on its own threads. The fetcher polls (a stat of each
  file at most once a second, a read only when a stamp moved) and hands gRPC a new
  certificate configuration once per listener when the watch took a new set (each fetcher
  remembers the generation it last handed out), else None: the connection made is served
  with the newest good files; connections already open keep the session they have.
- transport.dial asks for the current settings, so that a channel dialled after a rotation
  presents the new certificate and trusts the new CA; a channel keeps the credentials it was
  made with, so the holders of long-lived channels ask `generation` (through
  transport.credentials_generation) as they use them and dial again when it moved
  (service_channels.ChannelCache).

A poll holds a lock for its stat and read (small files; PEM_BYTES_MAX bounds them); a thread
that finds it held does not wait, it serves the files of the moment. A refused set is logged
once (the error says what is wrong and what to fix) and the old set is kept; a taken one is
logged once with its subject, serial and notAfter.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from samsa.common import tls
from samsa.common.tls_reload import FileSet, Refuse, Reloader, Stamp, Take, check

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Locations:
    """The files the ssl.* settings name (ca: None when ssl.ca.location is not set)."""

    certificate: str
    key: str
    ca: str | None = None


def _stamp(path: str | None) -> Stamp:
    if path is None:
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def _read(locations: Locations) -> FileSet:
    """The files' contents (TlsConfigError naming the one that cannot be read)."""
    return FileSet(
        certificate=tls.read_pem(locations.certificate, tls.CERTIFICATE_LOCATION),
        key=tls.read_pem(locations.key, tls.KEY_LOCATION, key=True),
        ca=None if locations.ca is None else tls.read_pem(locations.ca, tls.CA_LOCATION),
    )


class CertificateWatch:
    """The TLS files of a service process, reloaded when they change (module docstring)."""

    def __init__(
        self,
        locations: Locations,
        client_auth: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Read and check the files (TlsConfigError: the process does not start with them)."""
        self.locations = locations
        self.client_auth = client_auth
        self._clock = clock
        self._lock = threading.Lock()
        stamps = self._stamps()
        files = _read(locations)
        try:
            check(files)
        except tls.TlsConfigError as error:  # at start, name the files as read_pem does
            where = f"{locations.certificate}, {locations.key}" + (
                f", {locations.ca}" if locations.ca is not None else ""
            )
            raise tls.TlsConfigError(f"{error} (the files: {where})") from None
        self._reloader = Reloader(files, stamps, clock())
        # One reference, swapped whole: a reader without the lock sees an old or a new pair.
        self._current = (0, self._settings(files))

    def _stamps(self) -> tuple[Stamp, ...]:
        where = self.locations
        return (_stamp(where.certificate), _stamp(where.key), _stamp(where.ca))

    def _settings(self, files: FileSet) -> tls.TlsSettings:
        return tls.TlsSettings(
            ca=files.ca, certificate=files.certificate, key=files.key, client_auth=self.client_auth
        )

    def poll(self) -> None:
        """Look at the files if a second has passed, and take or refuse what changed."""
        if not self._lock.acquire(blocking=False):
            return  # another thread is looking: serve what is current
        try:
            reloader = self._reloader
            if not reloader.due(self._clock()):
                return
            stamps = self._stamps()
            if not reloader.needs_read(stamps):
                return
            try:
                candidate: FileSet | tls.TlsConfigError = _read(self.locations)
            except tls.TlsConfigError as error:
                candidate = error
            outcome = reloader.offer(stamps, candidate)
            where = {
                "ssl_certificate_location": self.locations.certificate,
                "ssl_key_location": self.locations.key,
                "ssl_ca_location": self.locations.ca,
            }
            if isinstance(outcome, Take):
                self._current = (reloader.generation, self._settings(outcome.files))
                log.info("took the rotated TLS files: certificate %s", outcome.summary, extra=where)
            elif isinstance(outcome, Refuse):
                log.error(
                    "refused the changed TLS files, still serving the previous ones: %s",
                    outcome.reason,
                    extra=where,
                )
        finally:
            self._lock.release()

    def settings(self) -> tls.TlsSettings:
        """The newest good files, as settings (for dialling a peer)."""
        self.poll()
        return self._current[1]

    def generation(self) -> int:
        """How many good file sets were taken since the start: it moves at each rotation taken.
        As cheap as `poll` (a clock read; the stat calls at most once a second)."""
        self.poll()
        return self._current[0]

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials for one listener, following the files (module docstring)."""
        generation, settings = self._current
        delivered = [generation]

        def fetch() -> grpc.ServerCertificateConfiguration | None:
            try:  # on gRPC's thread: an exception would only be logged by gRPC, without context
                self.poll()
                generation, settings = self._current
                if generation == delivered[0]:
                    return None
                delivered[0] = generation  # a concurrent handshake may hand it too: harmless
                return self._configuration(settings)
            except Exception:
                log.exception("reloading the TLS files failed; serving the previous ones")
                return None

        return grpc.dynamic_ssl_server_credentials(
            self._configuration(settings),
            fetch,
            require_client_authentication=self.client_auth == "required",
        )

    def _configuration(self, settings: tls.TlsSettings) -> grpc.ServerCertificateConfiguration:
        assert settings.key is not None and settings.certificate is not None
        return grpc.ssl_server_certificate_configuration(
            [(settings.key, settings.certificate)],
            root_certificates=settings.ca if self.client_auth == "required" else None,
        )

"""TLS for every gRPC connection Samsa makes or accepts: the settings, the PEM files they name,
and the grpc credentials made from them. Services (services/runtime/transport.py), the SDK
(samsa_client/channels.py), the CLI and `samsa up` all build theirs here, so that one setting
means the same thing everywhere.

The settings take Kafka's and librdkafka's names, so that a Kafka user's properties carry over:
- `security.protocol`: PLAINTEXT (the default) or SSL; a client also takes SASL_SSL (TLS, and a
  SASL/SCRAM login with the `sasl.*` keys below). SASL_PLAINTEXT is refused: the session ticket
  a login earns is a bearer credential, so Samsa sends it only over TLS. Services serve PLAINTEXT
  or SSL (their SASL is `sasl.enabled.mechanisms`, over SSL).
- `ssl.ca.location`: PEM file of the CA certificates that verify the other side; without it,
  the system's roots (gRPC's default).
- `ssl.certificate.location` and `ssl.key.location`: this side's certificate chain and its
  unencrypted private key, PEM. A server needs both; a client presents them when the server
  asks for a client certificate (`ssl.client.auth`).
- `ssl.client.auth` (servers only): none or required, as Kafka's broker setting. `required`
  refuses any connection without a certificate signed by `ssl.ca.location`. Kafka's third
  value, `requested`, is refused: gRPC's Python API can ask for a client certificate only by
  requiring it.
- `sasl.mechanism`, `sasl.username`, `sasl.password` (clients, with SASL_SSL only, all three
  required): the SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512) and the user's name and
  password (`SaslSettings`; the login itself is the SDK's, samsa_client/sasl_login.py).
- `sasl.mechanism=OAUTHBEARER` instead logs in with an OAuth token the client gets from an OIDC
  provider by the client_credentials grant (librdkafka's keys, `OidcSettings`):
  `sasl.oauthbearer.method=oidc` (required: librdkafka's default method makes unsecured tokens,
  which Samsa refuses), `sasl.oauthbearer.token.endpoint.url` (http:// or https://),
  `sasl.oauthbearer.client.id`, `sasl.oauthbearer.client.secret`, `sasl.oauthbearer.scope`
  (optional). sasl.username and sasl.password do not apply then and are refused, and so is
  `sasl.oauthbearer.extensions` (not supported).

One protocol per process: a service serves every listener (public and internal) with the same
credentials and dials its peers with them. gRPC checks the server's name against the
certificate's subject alternative names, so a certificate must name every address it is dialled
at (127.0.0.1 for `samsa up`, the host names a compose file gives).

A client reads its files once, when it is made, as Kafka's clients do. A service follows its
files while it runs (services/runtime/certificate_watch.py, deciding in common/tls_reload.py):
replaced atomically (written beside, renamed over), they serve new connections and new channels
to peers; a set that cannot be served (unreadable, not PEM, over PEM_BYTES_MAX, a key that is
not the certificate's) is refused with one error line and the previous set kept. Connections and
channels already open keep the credentials they were made with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import grpc

from samsa.common.scram import MECHANISMS

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL)  # a service's
CLIENT_PROTOCOLS = (PLAINTEXT, SSL, SASL_SSL)
OAUTHBEARER = "OAUTHBEARER"
SASL_MECHANISMS = (*MECHANISMS, OAUTHBEARER)  # SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
CLIENT_AUTH_MODES = ("none", "required")

# The client-side keys, as a client's configuration names them (the SDK, the CLI, Spark).
SECURITY_PROTOCOL = "security.protocol"
CA_LOCATION = "ssl.ca.location"
CERTIFICATE_LOCATION = "ssl.certificate.location"
KEY_LOCATION = "ssl.key.location"
SASL_MECHANISM = "sasl.mechanism"
SASL_USERNAME = "sasl.username"
SASL_PASSWORD = "sasl.password"
OAUTH_METHOD = "sasl.oauthbearer.method"
OAUTH_TOKEN_URL = "sasl.oauthbearer.token.endpoint.url"
OAUTH_CLIENT_ID = "sasl.oauthbearer.client.id"
OAUTH_CLIENT_SECRET = "sasl.oauthbearer.client.secret"
OAUTH_SCOPE = "sasl.oauthbearer.scope"
OAUTH_EXTENSIONS = "sasl.oauthbearer.extensions"
OAUTH_KEYS = (
    OAUTH_METHOD,
    OAUTH_TOKEN_URL,
    OAUTH_CLIENT_ID,
    OAUTH_CLIENT_SECRET,
    OAUTH_SCOPE,
    OAUTH_EXTENSIONS,
)
SASL_KEYS = (SASL_MECHANISM, SASL_USERNAME, SASL_PASSWORD)
CLIENT_KEYS = (
    SECURITY_PROTOCOL,
    CA_LOCATION,
    CERTIFICATE_LOCATION,
    KEY_LOCATION,
    *SASL_KEYS,
    *OAUTH_KEYS,
)

# A PEM file larger than this is not a certificate chain or a key (a chain of ten 4 KiB certs
# is 40 KiB): refused before it is read whole.
PEM_BYTES_MAX = 1 << 20


class TlsConfigError(ValueError):
    """A TLS setting or file that cannot work; the message names the setting and the fix."""


def protocol(value: str) -> str:
    """A client's `security.protocol` normalised (case-insensitive, as Kafka's), or
    TlsConfigError."""
    upper = value.strip().upper()
    if upper in CLIENT_PROTOCOLS:
        return upper
    if upper == "SASL_PLAINTEXT":
        raise TlsConfigError(
            f"security.protocol={value}: Samsa sends SASL only over TLS (the session ticket it "
            "earns is a bearer credential); use SASL_SSL"
        )
    raise TlsConfigError(
        f"security.protocol={value}: expected one of {', '.join(CLIENT_PROTOCOLS)}"
    )


@dataclass(frozen=True)
class OidcSettings:
    """Where and as whom an OAUTHBEARER client gets its tokens (the client_credentials grant);
    the secret is kept out of repr."""

    token_endpoint_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str | None = None


@dataclass(frozen=True)
class SaslSettings:
    """A client's SASL login: the mechanism's name and, for SCRAM, the user's name and password
    (kept out of repr, so that no log line shows it); for OAUTHBEARER, `oidc` (no user name: the
    token names the principal)."""

    mechanism: str
    username: str
    password: str = field(repr=False)
    oidc: OidcSettings | None = None

    @property
    def who(self) -> str:
        """Whose login this is, for messages."""
        if self.oidc is not None:
            return f"OAuth client {self.oidc.client_id!r}"
        return f"user {self.username!r}"

    @classmethod
    def from_client_config(cls, config: dict[str, str]) -> SaslSettings | None:
        """The login `config` asks for (None: not SASL_SSL). A sasl.* key without SASL_SSL, a
        missing one or an unknown mechanism is refused, naming the key."""
        chosen = protocol(config.get(SECURITY_PROTOCOL, PLAINTEXT))
        if chosen != SASL_SSL:
            if given := [k for k in (*SASL_KEYS, *OAUTH_KEYS) if config.get(k)]:
                raise TlsConfigError(
                    f"{given[0]} is set but security.protocol is {chosen}: set "
                    "security.protocol=SASL_SSL to log in with SASL"
                )
            return None
        if not config.get(SASL_MECHANISM):
            raise TlsConfigError(f"security.protocol=SASL_SSL needs {SASL_MECHANISM}")
        mechanism = config[SASL_MECHANISM].strip().upper()
        if mechanism not in SASL_MECHANISMS:
            raise TlsConfigError(
                f"sasl.mechanism={config[SASL_MECHANISM]}: expected one of "
                f"{', '.join(SASL_MECHANISMS)}"
            )
        if mechanism == OAUTHBEARER:
            return cls(mechanism, "", "", _oidc(config))
        if given := [k for k in OAUTH_KEYS if config.get(k)]:
            raise TlsConfigError(
                f"{given[0]} applies to sasl.mechanism=OAUTHBEARER only, not {mechanism}"
            )
        for key in (SASL_USERNAME, SASL_PASSWORD):
            if not config.get(key):
                raise TlsConfigError(f"security.protocol=SASL_SSL needs {key}")
        return cls(mechanism, config[SASL_USERNAME], config[SASL_PASSWORD])


def _oidc(config: dict[str, str]) -> OidcSettings:
    """The OIDC keys of an OAUTHBEARER login, checked together."""
    for key in (SASL_USERNAME, SASL_PASSWORD):
        if config.get(key):
            raise TlsConfigError(
                f"{key} does not apply to sasl.mechanism=OAUTHBEARER (the token names the "
                "principal): remove it, or use a SCRAM mechanism"
            )
    if config.get(OAUTH_EXTENSIONS):
        raise TlsConfigError(f"{OAUTH_EXTENSIONS} is not supported by Samsa: remove it")
    method = config.get(OAUTH_METHOD, "").strip().lower()
    if method != "oidc":
        raise TlsConfigError(
            f"sasl.mechanism=OAUTHBEARER needs {OAUTH_METHOD}=oidc (a token from an OIDC "
            "provider; unsecured tokens, librdkafka's default method, are refused)"
        )
    for key in (OAUTH_TOKEN_URL, OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET):
        if not config.get(key):
            raise TlsConfigError(f"{OAUTH_METHOD}=oidc needs {key}")
    url = config[OAUTH_TOKEN_URL].strip()
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise TlsConfigError(
            f"{OAUTH_TOKEN_URL}={url}: expected the OIDC provider's http:// or https:// token URL"
        )
    return OidcSettings(
        url,
        config[OAUTH_CLIENT_ID],
        config[OAUTH_CLIENT_SECRET],
        config.get(OAUTH_SCOPE) or None,
    )


def read_pem(path: str, setting: str, *, key: bool = False) -> bytes:
    """The PEM file `path` names, checked enough that a mistake is named here rather than
    surfacing later as an opaque handshake failure."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > PEM_BYTES_MAX:
            raise TlsConfigError(f"{setting}={path}: {size} bytes, not a PEM file")
        data = file.read_bytes()
    except OSError as error:
        raise TlsConfigError(f"{setting}={path}: cannot read it ({error.strerror})") from None
    if b"-----BEGIN " not in data:
        raise TlsConfigError(f"{setting}={path}: not a PEM file (no -----BEGIN line)")
    if key and (b"ENCRYPTED" in data):
        raise TlsConfigError(
            f"{setting}={path}: the key is encrypted; gRPC needs an unencrypted PEM key "
            "(openssl pkey -in KEY -out KEY.plain), kept readable by this user only"
        )
    if key and b"PRIVATE KEY-----" not in data:
        raise TlsConfigError(f"{setting}={path}: no PRIVATE KEY block in it")
    if not key and b"-----BEGIN CERTIFICATE-----" not in data:
        raise TlsConfigError(f"{setting}={path}: no CERTIFICATE block in it")
    return data


@dataclass(frozen=True)
class TlsSettings:
    """One side's TLS, as files' contents. `None` fields are not set."""

    ca: bytes | None = None
    certificate: bytes | None = None
    key: bytes | None = field(default=None, repr=False)  # a private key: in no log line
    client_auth: str = "none"

    @classmethod
    def load(
        cls,
        *,
        ca_location: str | None,
        certificate_location: str | None,
        key_location: str | None,
        client_auth: str = "none",
    ) -> TlsSettings:
        """Read the files the settings name (TlsConfigError naming the one that is wrong)."""
        if (certificate_location is None) != (key_location is None):
            raise TlsConfigError(
                "ssl.certificate.location and ssl.key.location go together: set both or neither"
            )
        if client_auth == "requested":
            raise TlsConfigError(
                "ssl.client.auth=requested: gRPC can ask for a client certificate only by "
                "requiring it; use required or none"
            )
        if client_auth not in CLIENT_AUTH_MODES:
            raise TlsConfigError(
                f"ssl.client.auth={client_auth}: expected one of {', '.join(CLIENT_AUTH_MODES)}"
            )
        if client_auth != "none" and ca_location is None:
            raise TlsConfigError(
                f"ssl.client.auth={client_auth} needs ssl.ca.location: the CA that signs the "
                "clients' certificates"
            )
        ca = None if ca_location is None else read_pem(ca_location, CA_LOCATION)
        certificate = key = None
        if certificate_location is not None and key_location is not None:
            certificate = read_pem(certificate_location, CERTIFICATE_LOCATION)
            key = read_pem(key_location, KEY_LOCATION, key=True)
        return cls(ca=ca, certificate=certificate, key=key, client_auth=client_auth)

    @classmethod
    def from_client_config(cls, config: dict[str, str]) -> TlsSettings | None:
        """A client's TLS from its configuration keys (CLIENT_KEYS); None for PLAINTEXT. An
        ssl.* key without security.protocol=SSL (or SASL_SSL) is refused, not silently ignored;
        so are the sasl.* keys that do not fit (SaslSettings.from_client_config)."""
        chosen = protocol(config.get(SECURITY_PROTOCOL, PLAINTEXT))
        SaslSettings.from_client_config(config)
        given = [k for k in (CA_LOCATION, CERTIFICATE_LOCATION, KEY_LOCATION) if config.get(k)]
        if chosen == PLAINTEXT:
            if given:
                raise TlsConfigError(
                    f"{given[0]} is set but security.protocol is PLAINTEXT: set "
                    "security.protocol=SSL (or SASL_SSL) to connect with TLS"
                )
            return None
        return cls.load(
            ca_location=config.get(CA_LOCATION) or None,
            certificate_location=config.get(CERTIFICATE_LOCATION) or None,
            key_location=config.get(KEY_LOCATION) or None,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """For dialling a TLS server: verify it with `ca` (else the system roots) and present
        this side's certificate when there is one."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.key, certificate_chain=self.certificate
        )

    def server_credentials(self) -> grpc.ServerCredentials:
        """For serving TLS; needs a certificate and key."""
        if self.certificate is None or self.key is None:
            raise TlsConfigError(
                "security.protocol=SSL on a service needs ssl.certificate.location and "
                "ssl.key.location: the certificate it serves with"
            )
        return grpc.ssl_server_credentials(
            [(self.key, self.certificate)],
            root_certificates=self.ca if self.client_auth == "required" else None,
            require_client_auth=self.client_auth == "required",
        )

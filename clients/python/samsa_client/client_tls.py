"""A client's security, from its configuration: TLS (`security.protocol`, `ssl.ca.location`,
`ssl.certificate.location`, `ssl.key.location`) and a SASL/SCRAM login (`security.protocol=
SASL_SSL`, `sasl.mechanism`, `sasl.username`, `sasl.password`): the keys of
`samsa.common.tls.CLIENT_KEYS` (with sasl.mechanism=OAUTHBEARER, the sasl.oauthbearer.* keys
instead of a user name and password), Kafka's and librdkafka's names, which every SDK client takes
(Producer, Consumer, their asyncio twins, Admin, PartitionRangeReader).

Theory of operation. A client reads its security once, when it is built: `client_security`
checks the keys together and reads the PEM files they name (samsa.common.tls does both), so a
wrong protocol, an ssl.* key with PLAINTEXT, a sasl.* key without SASL_SSL, a missing user name,
a certificate without its key or a file that cannot be read fails the constructor with
InvalidConfigError naming the key, as any other bad setting does, rather than the first call
with an opaque handshake failure. The `ClientSecurity` it returns (None: PLAINTEXT) goes to the
client's `Channels` and, through its driver, `AioChannels` (channels.py): one copy of the files
and one login (sasl_login.py) per client, whatever the number of servers it dials. No exchange
runs here: the first call logs in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import grpc

from samsa.client.config_values import parse_optional_nonempty, parse_string
from samsa.client.sasl_exchange import oauthbearer_exchange, scram_exchange
from samsa.client.sasl_login import SaslLogin, TicketPlugin
from samsa.common.errors import InvalidConfigError
from samsa.common.tls import (
    CLIENT_KEYS,
    SECURITY_PROTOCOL,
    SaslSettings,
    TlsConfigError,
    TlsSettings,
)

__all__ = ["CLIENT_KEYS", "ClientSecurity", "client_security", "client_tls"]


@dataclass(frozen=True)
class ClientSecurity:
    """What a client's channels dial with: TLS, and the SASL login whose ticket every call
    carries (None: TLS alone)."""

    tls: TlsSettings
    login: SaslLogin | None = None

    @classmethod
    def of(cls, tls: TlsSettings, sasl: SaslSettings | None) -> ClientSecurity:
        """TLS, with a login over `sasl` whose exchanges dial with the same TLS."""
        if sasl is None:
            return cls(tls)
        exchange = oauthbearer_exchange if sasl.oidc is not None else scram_exchange
        return cls(tls, SaslLogin(sasl, partial(exchange, sasl, tls)))

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """TLS, and with a login its ticket on every call (sync and grpc.aio channels alike)."""
        credentials = self.tls.channel_credentials()
        if self.login is None:
            return credentials
        ticket = grpc.metadata_call_credentials(TicketPlugin(self.login), name="samsa-sasl")
        return grpc.composite_channel_credentials(credentials, ticket)


def client_security(config: Mapping[str, object]) -> ClientSecurity | None:
    """The security `config` asks for (its other keys are ignored), files read; None for
    PLAINTEXT. InvalidConfigError, naming the key, for a value or file that cannot work."""
    given = _given(config)
    try:
        tls = TlsSettings.from_client_config(given)
        sasl = SaslSettings.from_client_config(given)
    except TlsConfigError as error:
        raise InvalidConfigError(str(error)) from None
    return None if tls is None else ClientSecurity.of(tls, sasl)


def client_tls(config: Mapping[str, object]) -> TlsSettings | None:
    """The TLS part of `client_security` (the same checks)."""
    security = client_security(config)
    return None if security is None else security.tls


def _given(config: Mapping[str, object]) -> dict[str, str]:
    given: dict[str, str] = {}
    for key in CLIENT_KEYS:
        value = config.get(key)
        if key == SECURITY_PROTOCOL and value is not None:
            given[key] = parse_string(key, value)
        elif (location := parse_optional_nonempty(key, value)) is not None:
            given[key] = location
    return given

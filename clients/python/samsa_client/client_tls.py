"""A client's TLS, from its configuration: the four keys of `samsa.common.tls.CLIENT_KEYS`
(`security.protocol`, `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, Kafka's
and librdkafka's names), which every SDK client takes (Producer, Consumer, their asyncio twins,
Admin, PartitionRangeReader).

Theory of operation. A client reads its TLS once, when it is built: `client_tls` checks the keys
together and reads the PEM files they name (samsa.common.tls does both), so a wrong protocol, an
ssl.* key with PLAINTEXT, a certificate without its key or a file that cannot be read fails the
constructor with InvalidConfigError naming the key, as any other bad setting does, rather than
the first call with an opaque handshake failure. The `TlsSettings` it returns (None: PLAINTEXT)
go to the client's `Channels` and, through its driver, `AioChannels` (channels.py): one copy of
the files per client, whatever the number of brokers it dials.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.client.config_values import parse_optional_nonempty, parse_string
from samsa.common.errors import InvalidConfigError
from samsa.common.tls import CLIENT_KEYS, SECURITY_PROTOCOL, TlsConfigError, TlsSettings

__all__ = ["CLIENT_KEYS", "client_tls"]


def client_tls(config: Mapping[str, object]) -> TlsSettings | None:
    """The TLS settings `config` gives (its other keys are ignored), files read; None for
    PLAINTEXT. InvalidConfigError, naming the key, for a value or file that cannot work."""
    given: dict[str, str] = {}
    for key in CLIENT_KEYS:
        value = config.get(key)
        if key == SECURITY_PROTOCOL and value is not None:
            given[key] = parse_string(key, value)
        elif (location := parse_optional_nonempty(key, value)) is not None:
            given[key] = location
    try:
        return TlsSettings.from_client_config(given)
    except TlsConfigError as error:
        raise InvalidConfigError(str(error)) from None

"""`--command-config FILE`: a client's connection settings from a properties file, as Kafka's
admin tools take them (kafka-topics.sh --command-config client.properties).

The file is Java properties in the form such files take in practice: `key=value` lines (or
`key: value`), blank lines, and `#` or `!` comment lines. It carries the settings that decide how
to connect, the keys of common/tls.py: TLS (security.protocol, ssl.ca.location,
ssl.certificate.location, ssl.key.location) and SASL/SCRAM (security.protocol=SASL_SSL,
sasl.mechanism, sasl.username, sasl.password: keep such a file readable by its user only), or
SASL/OAUTHBEARER (sasl.mechanism=OAUTHBEARER and the sasl.oauthbearer.* OIDC keys); any
other key is refused by name rather than
ignored, so that a setting the user meant to give (a producer's acks, say) is not lost silently.
`samsa up --tls` writes one: `<data-dir>/tls/client.properties`. Kept apart from
command_support.py so that `python -m samsa.cli.health` reads it without importing the SDK.
"""

from __future__ import annotations

from pathlib import Path

from samsa.common import tls

# A properties file of seven settings is a few hundred bytes: a larger one is not one.
COMMAND_CONFIG_BYTES_MAX = 64 * 1024


class CommandConfigError(ValueError):
    """A --command-config file that cannot be used; the message names the file and the line."""


def parse_command_config(text: str, source: str) -> dict[str, str]:
    """The settings of a properties file's `text`; CommandConfigError naming `source` and the
    line for a line that is not KEY=VALUE or a key that is not a connection setting."""
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separator = min((line.find(s) for s in "=:" if s in line), default=-1)
        if separator <= 0:
            raise CommandConfigError(f"{source} line {number}: {line!r} is not KEY=VALUE")
        key, value = line[:separator].strip(), line[separator + 1 :].strip()
        if key not in tls.CLIENT_KEYS:
            raise CommandConfigError(
                f"{source} line {number}: {key} is not a connection setting; --command-config "
                f"takes {', '.join(tls.CLIENT_KEYS)}"
            )
        settings[key] = value
    return settings


def read_command_config(path: Path) -> dict[str, str]:
    """The settings of the properties file at `path` (check_security checks them as a TLS)."""
    try:
        size = path.stat().st_size
        if size > COMMAND_CONFIG_BYTES_MAX:
            raise CommandConfigError(
                f"--command-config {path}: {size} bytes, not a properties file"
            )
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise CommandConfigError(f"--command-config {path}: cannot read it ({reason})") from None
    return parse_command_config(text, f"--command-config {path}")


def check_security(settings: dict[str, str], source: str) -> None:
    """CommandConfigError unless `settings` are a client's working security settings (or none):
    a TLS key without security.protocol=SSL, a sasl.* key without SASL_SSL or one missing with
    it, a PEM file missing, named with `source`."""
    try:
        tls.TlsSettings.from_client_config(settings)
    except tls.TlsConfigError as error:
        raise CommandConfigError(f"{source}: {error}") from None

"""The settings every service process has, as bases of BrokerConfig, ControllerConfig and
CoordinatorConfig: where it listens and what it advertises (and, optionally, the same for an
internal listener: listeners.py), the cluster secret, the metrics address; members (brokers,
coordinators) also name the controllers they register with. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.common import jwt_validation, limits, scram, tls
from samsa.metadata.acls import parse_super_users
from samsa.metadata.principal_rules import PrincipalRules
from samsa.services.runtime import sasl_oauthbearer as oauth
from samsa.services.runtime.config import (
    RelationProblem,
    ValueProblem,
    address,
    address_list,
    advertisable_address,
    check_advertised,
    check_internal,
    integer,
    key,
    non_empty,
    one_of,
    optional_address,
    optional_advertisable_address,
    optional_listen,
    optional_path,
)

# authorizer.class.name: the values that turn ACL enforcement on (Kafka's class name accepted, so
# that a Kafka properties file works unchanged); "" is off.
AUTHORIZER_STANDARD = "standard"
AUTHORIZER_NAMES = (AUTHORIZER_STANDARD, "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def authorizer_name(text: str) -> str:
    """ "" (off) or "standard" (any accepted spelling of the standard authorizer)."""
    name = text.strip()
    if not name:
        return ""
    if name not in AUTHORIZER_NAMES:
        raise ValueProblem("be empty (off) or one of " + ", ".join(AUTHORIZER_NAMES))
    return AUTHORIZER_STANDARD


def super_users(text: str) -> frozenset[str]:
    try:
        return parse_super_users(text)
    except ValueError as error:
        raise ValueProblem(f"be ;-separated principals (User:name): {error}") from None


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueProblem("be true or false")
    return value == "true"


def principal_rules(text: str) -> PrincipalRules:
    try:
        return PrincipalRules.parse(text)
    except ValueError as error:
        raise ValueProblem(
            "be RULE:pattern/replacement/[LU] and DEFAULT, comma-separated: "
            + str(error).removeprefix("ssl.principal.mapping.rules: ")
        ) from None


# sasl.session.lifetime.ms's bounds (common/limits.py says why); an hour by default.
SASL_SESSION_LIFETIME_MS_MIN = limits.sasl_session_lifetime_ms_min
SASL_SESSION_LIFETIME_MS_MAX = limits.sasl_session_lifetime_ms_max
SASL_SESSION_LIFETIME_MS_DEFAULT = 3_600_000


# The mechanisms a service may enable: SCRAM's, and OAUTHBEARER (sasl_oauthbearer.py).
SASL_MECHANISM_NAMES = (*scram.MECHANISMS, oauth.MECHANISM)


def sasl_mechanisms(text: str) -> tuple[str, ...]:
    """The enabled mechanisms' names, upper-cased, without repeats; () is SASL off."""
    names: list[str] = []
    for written in filter(None, (part.strip() for part in text.split(","))):
        name = written.upper()
        if name not in SASL_MECHANISM_NAMES:
            raise ValueProblem(
                "be empty (SASL off) or comma-separated mechanisms among "
                f"{', '.join(SASL_MECHANISM_NAMES)}, not {written[:32]!r}"
            )
        if name not in names:
            names.append(name)
    return tuple(names)


@dataclass(frozen=True, kw_only=True)
class ServiceConfig:
    listeners: str = key(
        "listeners",
        address,
        flags=["--listeners", "--listen"],
        help="host:port the gRPC server binds (0.0.0.0:PORT: every interface)",
    )
    advertised_listeners: str | None = key(
        "advertised.listeners",
        advertisable_address,
        default=None,
        help="host:port others dial for this service (default: listeners)",
    )
    internal_listeners: str | None = key(
        "internal.listeners",
        optional_address,
        default=None,
        help="host:port of a second gRPC listener for the cluster's own traffic (replication, "
        "registration and heartbeats, coordinator<->broker streams), with its own connection "
        "and request bounds so that strangers filling max.connections cannot cut it (Kafka's "
        "inter.broker.listener.name, KIP-291); off by default",
    )
    internal_advertised_listeners: str | None = key(
        "internal.advertised.listeners",
        optional_advertisable_address,
        default=None,
        help="host:port members dial for this service's internal listener (default: "
        "internal.listeners)",
    )
    secret_file: str = key(
        "cluster.secret.file",
        non_empty,
        flags=["--secret-file"],
        help="the cluster secret (the controllers' file): proves this process is a member",
    )
    metrics_listen: str | None = key(
        "metrics.listen",
        optional_listen,
        default=None,
        help="serve Prometheus metrics at HOST:PORT/metrics; off by default",
    )
    max_connections: int = key(
        "max.connections",
        integer(1, 1 << 20),
        default=limits.grpc_connections_max,
        help="client connections served at once, at most half the open-files limit; one more "
        "is closed as it is accepted (Kafka's max.connections)",
    )
    health_file: str | None = key(
        "health.file",
        optional_path,
        default=None,
        help="a file touched every second while this process's own gRPC listener answers "
        "SERVING, for container health checks that stat it instead of starting Python; "
        "off by default",
    )

    security_protocol: str = key(
        "security.protocol",
        one_of(tls.PROTOCOLS),
        default=tls.PLAINTEXT,
        help="PLAINTEXT, or SSL: every listener serves TLS and every call to a peer uses it "
        "(common/tls.py)",
    )
    ssl_ca_location: str | None = key(
        "ssl.ca.location",
        optional_path,
        default=None,
        help="PEM file of the CA certificates that verify peers (and clients, with "
        "ssl.client.auth=required); default: the system's roots",
    )
    ssl_certificate_location: str | None = key(
        "ssl.certificate.location",
        optional_path,
        default=None,
        help="PEM file of this process's certificate chain, served on every listener and "
        "presented to peers; it must name every address this process is dialled at",
    )
    ssl_key_location: str | None = key(
        "ssl.key.location",
        optional_path,
        default=None,
        help="PEM file of the certificate's unencrypted private key (keep it 0600)",
    )
    ssl_client_auth: str = key(
        "ssl.client.auth",
        one_of(tls.CLIENT_AUTH_MODES),
        default="none",
        help="required: refuse any connection without a certificate ssl.ca.location signs "
        "(clients and peers alike); none: any client may connect",
    )

    authorizer_class_name: str = key(
        "authorizer.class.name",
        authorizer_name,
        default="",
        help="standard (or Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer): "
        "every call is decided against the ACLs in the metadata log (authorization.py); "
        "empty (the default): ACLs are off",
    )
    super_users: frozenset[str] = key(
        "super.users",
        super_users,
        default=frozenset(),
        help="principals allowed everything whatever the ACLs, ;-separated "
        "(User:CN=admin,O=example;User:ops)",
    )
    allow_everyone_if_no_acl_found: bool = key(
        "allow.everyone.if.no.acl.found",
        boolean,
        default=False,
        help="true: a resource without any ACL is open to everyone (Kafka's key); false (the "
        "default): only super users may use it",
    )
    # PrincipalRules is immutable (slots, a tuple of rules): one default shared by every config.
    ssl_principal_mapping_rules: PrincipalRules = key(  # noqa: RUF009
        "ssl.principal.mapping.rules",
        principal_rules,
        default=PrincipalRules.parse("DEFAULT"),
        help="how a client certificate's subject becomes a principal's name (KIP-371): "
        "RULE:pattern/replacement/[LU] rules and DEFAULT (the whole subject), comma-separated, "
        "first match wins",
    )

    sasl_enabled_mechanisms: tuple[str, ...] = key(
        "sasl.enabled.mechanisms",
        sasl_mechanisms,
        default=(),
        help="SCRAM-SHA-256, SCRAM-SHA-512 and/or OAUTHBEARER, comma-separated: every call must "
        "then carry a session ticket from a SASL exchange (or the cluster's membership proof); "
        "needs security.protocol=SSL. Empty (the default): SASL is off",
    )
    sasl_session_lifetime_ms: int = key(
        "sasl.session.lifetime.ms",
        integer(SASL_SESSION_LIFETIME_MS_MIN, SASL_SESSION_LIFETIME_MS_MAX),
        default=SASL_SESSION_LIFETIME_MS_DEFAULT,
        help="how long a session ticket stays valid; clients authenticate again before it runs "
        "out (Kafka's connections.max.reauth.ms, KIP-368)",
    )
    sasl_oauthbearer_jwks_endpoint_url: str | None = key(
        "sasl.oauthbearer.jwks.endpoint.url",
        oauth.jwks_url,
        default=None,
        help="file://, http:// or https:// URL of the identity provider's JWKS (its signing "
        "keys), which OAUTHBEARER tokens are verified with; required with OAUTHBEARER, fetched "
        "at start (the process refuses to start without it)",
    )
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = key(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        integer(oauth.JWKS_REFRESH_MS_MIN, 7 * 24 * 3600 * 1000),
        default=oauth.JWKS_REFRESH_MS_DEFAULT,
        help="how old the JWKS may get before it is fetched again (also fetched, at most every "
        "10 s, when a token names a key it does not hold)",
    )
    sasl_oauthbearer_expected_audience: tuple[str, ...] = key(
        "sasl.oauthbearer.expected.audience",
        oauth.audiences,
        default=(),
        help="comma-separated audiences; a token's aud must name one of them. Empty (the "
        "default): aud is not checked",
    )
    sasl_oauthbearer_expected_issuer: str | None = key(
        "sasl.oauthbearer.expected.issuer",
        oauth.optional_text,
        default=None,
        help="the iss a token must carry (the identity provider's issuer URL); unset: not checked",
    )
    sasl_oauthbearer_sub_claim_name: str = key(
        "sasl.oauthbearer.sub.claim.name",
        oauth.claim_name,
        default=jwt_validation.SUB_CLAIM_DEFAULT,
        help="the token claim that names the principal (User:<it> for the ACLs)",
    )
    sasl_oauthbearer_clock_skew_seconds: int = key(
        "sasl.oauthbearer.clock.skew.seconds",
        integer(0, oauth.CLOCK_SKEW_S_MAX),
        default=jwt_validation.CLOCK_SKEW_S_DEFAULT,
        help="how far the identity provider's clock and this process's may differ when exp, nbf "
        "and iat are checked",
    )

    def __post_init__(self) -> None:
        check_advertised(self.listeners, self.advertised_listeners)
        check_internal(self.listeners, self.internal_listeners, self.internal_advertised_listeners)
        check_tls(self)
        if self.sasl_enabled_mechanisms and self.security_protocol != tls.SSL:
            raise RelationProblem(
                ("sasl.enabled.mechanisms", "security.protocol"),
                "sasl.enabled.mechanisms needs security.protocol=SSL: the session ticket a "
                "client gets is a bearer credential, and must only travel encrypted",
            )
        check_oauthbearer(self)

    @property
    def authorizer_enabled(self) -> bool:
        """Whether ACLs are enforced (authorizer.class.name set)."""
        return self.authorizer_class_name != ""

    @property
    def advertised_listener(self) -> str:
        """The address others dial: advertised.listeners, else listeners."""
        return self.advertised_listeners or self.listeners

    @property
    def internal_advertised_listener(self) -> str | None:
        """The address members dial for the internal listener: internal.advertised.listeners,
        else internal.listeners; None when this process has no internal listener."""
        return self.internal_advertised_listeners or self.internal_listeners


@dataclass(frozen=True, kw_only=True)
class MemberConfig(ServiceConfig):
    """A broker's or a coordinator's: also the controllers it registers with."""

    controllers: tuple[str, ...] = key(
        "controller.quorum.bootstrap.servers",
        address_list,
        flags=["--controllers"],
        help="controller endpoints, comma-separated",
    )


def check_oauthbearer(config: ServiceConfig) -> None:
    """OAUTHBEARER needs the JWKS its tokens are verified with; a JWKS without it is a mistake."""
    enabled = oauth.MECHANISM in config.sasl_enabled_mechanisms
    if enabled and config.sasl_oauthbearer_jwks_endpoint_url is None:
        raise RelationProblem(
            ("sasl.enabled.mechanisms", "sasl.oauthbearer.jwks.endpoint.url"),
            "sasl.enabled.mechanisms has OAUTHBEARER: set sasl.oauthbearer.jwks.endpoint.url to "
            "the identity provider's JWKS, which verifies the tokens",
        )
    if not enabled and config.sasl_oauthbearer_jwks_endpoint_url is not None:
        raise RelationProblem(
            ("sasl.oauthbearer.jwks.endpoint.url", "sasl.enabled.mechanisms"),
            "sasl.oauthbearer.jwks.endpoint.url is set but sasl.enabled.mechanisms has no "
            "OAUTHBEARER: add it to accept OAuth logins",
        )


def check_tls(config: ServiceConfig) -> None:
    """The ssl.* keys fit security.protocol: SSL needs a certificate and its key, client
    authentication needs the CA that signs clients, and ssl.* with PLAINTEXT is a mistake."""
    ssl_keys = {
        "ssl.ca.location": config.ssl_ca_location,
        "ssl.certificate.location": config.ssl_certificate_location,
        "ssl.key.location": config.ssl_key_location,
    }
    if config.security_protocol == tls.PLAINTEXT:
        given = [name for name, value in ssl_keys.items() if value]
        if config.ssl_client_auth != "none":
            given.append("ssl.client.auth")
        if given:
            raise RelationProblem(
                ("security.protocol", given[0]),
                f"{given[0]} is set but security.protocol is PLAINTEXT: set "
                "security.protocol=SSL to serve TLS",
            )
        return
    if not config.ssl_certificate_location or not config.ssl_key_location:
        raise RelationProblem(
            ("security.protocol", "ssl.certificate.location", "ssl.key.location"),
            "security.protocol=SSL needs ssl.certificate.location and ssl.key.location: the "
            "certificate this process serves with, and its key",
        )
    if config.ssl_client_auth == "required" and not config.ssl_ca_location:
        raise RelationProblem(
            ("ssl.client.auth", "ssl.ca.location"),
            "ssl.client.auth=required needs ssl.ca.location: the CA that signs the clients' "
            "and peers' certificates",
        )

"""What `<data-dir>/cluster.json` holds: the ids and loopback ports of a local cluster's
controllers, brokers and coordinators, and the settings given to them (launcher.py writes it at
the first start and reads it at every later one).

Each process has an internal listener (services/runtime/listeners.py) on `internal_port`, which
the cluster's own members dial, so that clients filling a process's max.connections cannot cut
replication or heartbeats. 0 means none: a cluster.json written before internal listeners
existed has none, and its processes keep one listener.

`tls`: every process serves and dials TLS with client certificates required (`samsa up --tls`),
from the private CA and the certificates in `<data-dir>/tls/` (cluster_tls.py makes them): one
pair per process, named as the process (controller-1, broker-1, coordinator-1), and `client`,
which the CLI and the SDK present. A cluster.json without the key is a plaintext cluster.

`authorizer` (`samsa up --tls --authorizer`, only with `tls`): every process enforces ACLs
(services/runtime/authorization.py) with the `client` certificate's principal as its only super
user, so that the CLI (and the README's flow) can do everything, grants included; any other
certificate of the cluster's CA (`cluster_tls.issue_client`) is a principal that needs ACLs.

`sasl` (`samsa up --sasl`, which implies `tls`): every process requires a SASL/SCRAM login
(services/runtime/sasl_gate.py) over TLS without client certificates, as Kafka's SASL_SSL
listeners do. The controllers create the first user, `admin`, from the bootstrap file
`<data-dir>/tls/scram-credentials` (a random password made once, kept beside it in
`admin.password`, both 0600); the CLI and the README's flow log in as admin, the super user
when `authorizer` is on too. Other users are made with `samsa users set-scram`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from samsa.common import tls as tls_settings

HOST = "127.0.0.1"
TLS_DIR = "tls"
# The certificate the CLI (and an application of the README's flow) presents to a TLS cluster.
CLIENT_CERTIFICATE = "client"
# The principal the client certificate's subject gives (its DN as gRPC renders it, mapped by the
# default ssl.principal.mapping.rules): a local authorizing cluster's one super user.
CLIENT_PRINCIPAL = f"User:CN={CLIENT_CERTIFICATE},O=samsa"
# A SASL cluster's first user (its bootstrap credential), whom the CLI logs in as.
SASL_USER = "admin"
SASL_PRINCIPAL = f"User:{SASL_USER}"
SASL_MECHANISM = "SCRAM-SHA-512"
SASL_MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512"
SASL_PASSWORD_FILE = "admin.password"
SASL_BOOTSTRAP_FILE = "scram-credentials"


class _Listening:
    """A process's addresses on loopback: its gRPC listener and its internal one (None when
    `internal_port` is 0)."""

    grpc_port: int
    internal_port: int

    @property
    def endpoint(self) -> str:
        return f"{HOST}:{self.grpc_port}"

    @property
    def internal_endpoint(self) -> str | None:
        return f"{HOST}:{self.internal_port}" if self.internal_port else None


@dataclass(frozen=True)
class ControllerSpec(_Listening):
    node_id: int
    grpc_port: int
    raft_port: int
    internal_port: int = 0

    @property
    def raft_address(self) -> str:
        return f"{HOST}:{self.raft_port}"


@dataclass(frozen=True)
class BrokerSpec(_Listening):
    broker_id: int
    grpc_port: int
    rack: str = ""
    internal_port: int = 0


@dataclass(frozen=True)
class CoordinatorSpec(_Listening):
    coordinator_id: int
    grpc_port: int
    internal_port: int = 0


@dataclass(frozen=True)
class ClusterSpec:
    controllers: tuple[ControllerSpec, ...]
    brokers: tuple[BrokerSpec, ...]
    settings: dict[str, str] = field(default_factory=dict)
    coordinators: tuple[CoordinatorSpec, ...] = ()
    tls: bool = False
    authorizer: bool = False
    sasl: bool = False

    @property
    def process_names(self) -> list[str]:
        """Every process by its name: its log's, its certificate's (controller-1, broker-1,
        coordinator-1)."""
        return (
            [f"controller-{c.node_id}" for c in self.controllers]
            + [f"broker-{b.broker_id}" for b in self.brokers]
            + [f"coordinator-{c.coordinator_id}" for c in self.coordinators]
        )

    @property
    def ports(self) -> set[int]:
        """Every port the cluster's processes listen on (gRPC, internal gRPC and Raft)."""
        processes = [*self.controllers, *self.brokers, *self.coordinators]
        return (
            {p.grpc_port for p in processes}
            | {c.raft_port for c in self.controllers}
            | {p.internal_port for p in processes if p.internal_port}
        )

    @property
    def bootstrap_servers(self) -> str:
        """What clients are given: the controllers serve cluster metadata (DESIGN §2)."""
        return ",".join(controller.endpoint for controller in self.controllers)

    @property
    def member_bootstrap_servers(self) -> str:
        """What brokers and coordinators are given: the controllers' internal listeners (their
        public ones for a controller without one)."""
        return ",".join(c.internal_endpoint or c.endpoint for c in self.controllers)

    def client_security(self, data_dir: Path) -> dict[str, str]:
        """The security settings a client of this cluster needs (the CLI's, the SDK's keys):
        TLS with the `client` certificate for a TLS cluster, a login as admin over TLS for a
        SASL one, none for a plaintext one."""
        if self.sasl:
            return sasl_client_security(data_dir)
        return tls_client_security(data_dir) if self.tls else {}

    def service_security(self, data_dir: Path, name: str) -> list[str]:
        """The flags that make process `name` serve and dial TLS with its own certificate and
        require one from every client (and, with `authorizer`, enforce ACLs with the client
        certificate as super user); none for a plaintext cluster."""
        if not self.tls:
            return []
        certificate, key = tls_pair(data_dir, name)
        super_user = SASL_PRINCIPAL if self.sasl else CLIENT_PRINCIPAL
        authorizer = (
            ["--authorizer-class-name", "standard", "--super-users", super_user]
            if self.authorizer
            else []
        )
        # cluster.json's settings may enable more (OAUTHBEARER, with its sasl.oauthbearer.* keys)
        mechanisms = self.settings.get("sasl.enabled.mechanisms", SASL_MECHANISMS)
        sasl = ["--sasl-enabled-mechanisms", mechanisms] if self.sasl else []
        return [
            *authorizer,
            *sasl,
            "--security-protocol",
            tls_settings.SSL,
            "--ssl-ca-location",
            str(tls_pair(data_dir, "ca")[0]),
            "--ssl-certificate-location",
            str(certificate),
            "--ssl-key-location",
            str(key),
            "--ssl-client-auth",
            "none" if self.sasl else "required",  # SASL clients log in instead
        ]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterSpec:
        data = json.loads(text)
        tls = data.get("tls", False)  # absent: written before TLS, a plaintext cluster
        if not isinstance(tls, bool):
            raise TypeError(f"tls is {tls!r}, not true or false")
        authorizer = data.get("authorizer", False)  # absent: written before ACLs, none
        if not isinstance(authorizer, bool):
            raise TypeError(f"authorizer is {authorizer!r}, not true or false")
        sasl = data.get("sasl", False)  # absent: written before SASL, none
        if not isinstance(sasl, bool):
            raise TypeError(f"sasl is {sasl!r}, not true or false")
        return cls(
            tuple(ControllerSpec(**c) for c in data["controllers"]),
            tuple(BrokerSpec(**b) for b in data["brokers"]),
            dict(data.get("settings", {})),
            tuple(CoordinatorSpec(**c) for c in data.get("coordinators", [])),
            tls,
            authorizer,
            sasl,
        )


def tls_client_security(data_dir: Path) -> dict[str, str]:
    """A client's settings for the TLS cluster of `data_dir`: its CA and the `client` pair."""
    certificate, key = tls_pair(data_dir, CLIENT_CERTIFICATE)
    return {
        tls_settings.SECURITY_PROTOCOL: tls_settings.SSL,
        tls_settings.CA_LOCATION: str(tls_pair(data_dir, "ca")[0]),
        tls_settings.CERTIFICATE_LOCATION: str(certificate),
        tls_settings.KEY_LOCATION: str(key),
    }


def sasl_client_security(data_dir: Path) -> dict[str, str]:
    """A client's settings for the SASL cluster of `data_dir`: its CA, and a login as admin
    with the password `samsa up` made (cluster_tls.ensure_sasl_credentials)."""
    password = (data_dir / TLS_DIR / SASL_PASSWORD_FILE).read_text().strip()
    return {
        tls_settings.SECURITY_PROTOCOL: tls_settings.SASL_SSL,
        tls_settings.CA_LOCATION: str(tls_pair(data_dir, "ca")[0]),
        tls_settings.SASL_MECHANISM: SASL_MECHANISM,
        tls_settings.SASL_USERNAME: SASL_USER,
        tls_settings.SASL_PASSWORD: password,
    }


def tls_pair(data_dir: Path, name: str) -> tuple[Path, Path]:
    """Where `<data-dir>/tls/` keeps `name`'s certificate and key (certificates.py's names:
    NAME.pem and NAME-key.pem; the CA's are ca.pem and ca-key.pem)."""
    directory = data_dir / TLS_DIR
    return directory / f"{name}.pem", directory / f"{name}-key.pem"


def read_spec(spec_file: Path) -> ClusterSpec:
    """The cluster `spec_file` describes; ValueError naming the file when it is not a spec
    written by this launcher (another program's JSON, a torn or hand-edited file)."""
    try:
        return ClusterSpec.from_json(spec_file.read_text())
    except (ValueError, LookupError, TypeError, AttributeError) as error:
        raise ValueError(
            f"{spec_file} is not a cluster.json `samsa up` wrote ({type(error).__name__}: "
            f"{error}); move it away, or use another --data-dir"
        ) from None

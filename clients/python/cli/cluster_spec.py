"""What `<data-dir>/cluster.json` holds: the ids and loopback ports of a local cluster's
controllers, brokers and coordinators, and the settings given to them (launcher.py writes it at
the first start and reads it at every later one).

Each process has an internal listener (services/runtime/listeners.py) on `internal_port`, which
the cluster's own members dial, so that clients filling a process's max.connections cannot cut
replication or heartbeats. 0 means none: a cluster.json written before internal listeners
existed has none, and its processes keep one listener.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

HOST = "127.0.0.1"


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

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterSpec:
        data = json.loads(text)
        return cls(
            tuple(ControllerSpec(**c) for c in data["controllers"]),
            tuple(BrokerSpec(**b) for b in data["brokers"]),
            dict(data.get("settings", {})),
            tuple(CoordinatorSpec(**c) for c in data.get("coordinators", [])),
        )


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

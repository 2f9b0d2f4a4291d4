"""The ACL tests' cluster: TLS and the authorizer on in every process, and its clients.

Theory of operation. `acl_cluster` starts a local cluster through `local_cluster` (real
processes, every one stopped by PID on the way out, also on failure) with tls=True and
authorizer=True: every listener requires a client certificate, and every process decides each
call against the ACLs of its own metadata image. The CLI's certificate
(`spec.client_security`) is the one super user (`super_user`); any other principal,
User:CN=<name>,O=samsa, presents a certificate issued from the cluster's CA
(`cluster_tls.issue_client`: `as_client` for the SDK, `channel_as` for raw gRPC stubs). The
topics it is given are created by the super user before the tests run; `grant` adds ACLs as the
super user. A new ACL applies in each process once it has replayed it: tests wait for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import grpc
import pytest
from cluster_helpers import local_cluster

from samsa.cli.cluster_tls import issue_client, open_channel
from samsa.cli.launcher import LocalCluster
from samsa.client import Admin
from samsa.metadata.acls import AclBinding, Operation, PatternType, Permission, ResourceType


@contextmanager
def acl_cluster(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    controllers: int = 1,
    brokers: int = 1,
    coordinators: int = 0,
    topics: Mapping[str, tuple[int, int]] | None = None,
) -> Iterator[LocalCluster]:
    """A started TLS+authorizer cluster in a new directory named after `name`, with `topics`
    (name -> (partitions, replication factor)) created by the super user."""
    data_dir = tmp_path_factory.mktemp(name)
    with local_cluster(
        data_dir, controllers, brokers, coordinators=coordinators, tls=True, authorizer=True
    ) as running:
        if topics:
            with Admin(super_user(running)) as admin:
                for topic, (partitions, replication) in topics.items():
                    admin.create_topic(topic, partitions, replication)
        yield running


def principal(name: str) -> str:
    """The principal of `name`'s certificate (issue_client's subject, DEFAULT mapping)."""
    return f"User:CN={name},O=samsa"


def super_user(cluster: LocalCluster) -> dict[str, object]:
    """An SDK client's configuration as the super user (the CLI's certificate)."""
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        **cluster.spec.client_security(cluster.data_dir),
    }


def as_client(cluster: LocalCluster, name: str) -> dict[str, object]:
    """An SDK client's configuration presenting `name`'s certificate."""
    return {
        "bootstrap.servers": cluster.spec.bootstrap_servers,
        **issue_client(cluster.data_dir, name),
    }


def channel_as(cluster: LocalCluster, endpoint: str, name: str) -> grpc.Channel:
    """A gRPC channel to `endpoint` presenting `name`'s certificate, for raw stubs."""
    return open_channel(endpoint, issue_client(cluster.data_dir, name))


def allow(
    who: str,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    """An ALLOW binding for principal `who` from any host."""
    return AclBinding(resource_type, name, pattern, who, "*", operation, Permission.ALLOW)


def grant(cluster: LocalCluster, *bindings: AclBinding) -> None:
    """Add `bindings` as the super user; each must be created."""
    with Admin(super_user(cluster)) as admin:
        assert set(admin.create_acls(bindings).values()) == {None}

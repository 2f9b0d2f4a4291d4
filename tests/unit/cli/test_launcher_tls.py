"""Goal: a local cluster made with TLS (`samsa up --tls`) gets its CA and one certificate per
process and one for clients, once; every process is told to serve TLS with its own certificate
and to require client certificates; the launcher's health check dials with the client
certificate; a plaintext cluster is as before, and a data directory's TLS cannot silently flip.

Method: the launcher on tmp_path, no process started; the health check against an in-process
gRPC server serving a controller's DescribeCluster over TLS with client certificates required.
"""

from __future__ import annotations

import json
import stat
from concurrent import futures
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from samsa.cli.cluster_spec import ClusterSpec, ControllerSpec
from samsa.cli.launcher import LocalCluster, cluster_health, load_or_create, new_cluster_spec
from samsa.common.tls import TlsSettings
from samsa.services.broker.broker_config import BrokerConfig
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.coordinator.coordinator_config import CoordinatorConfig
from samsa.services.runtime.config_loading import load
from samsa.v1 import controller_pb2, controller_pb2_grpc

NAMES = ["ca", "controller-1", "broker-1", "broker-2", "coordinator-1", "client"]


def _issuer_verifies(ca_pem: Path, pem: Path) -> None:
    """Raises unless `pem` is signed by the CA of `ca_pem`."""
    ca = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    certificate = x509.load_pem_x509_certificate(pem.read_bytes())
    certificate.verify_directly_issued_by(ca)


def test_a_tls_cluster_gets_a_ca_and_a_certificate_per_process_once(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 1, 2, coordinators=1, tls=True)
    assert spec.tls
    tls = tmp_path / "tls"
    for name in NAMES:
        assert (tls / f"{name}.pem").exists(), name
        assert stat.S_IMODE((tls / f"{name}-key.pem").stat().st_mode) == 0o600, name
        if name != "ca":
            _issuer_verifies(tls / "ca.pem", tls / f"{name}.pem")
    certificate = x509.load_pem_x509_certificate((tls / "broker-1.pem").read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    before = {path.name: path.read_bytes() for path in tls.iterdir()}
    # A restart reuses them all; a coordinator added at a restart gets one from the same CA.
    again = load_or_create(tmp_path, 1, 2, coordinators=2, tls=True)
    after = {path.name: path.read_bytes() for path in tls.iterdir()}
    assert {name: after[name] for name in before} == before
    assert set(after) - set(before) == {"coordinator-2.pem", "coordinator-2-key.pem"}
    _issuer_verifies(tls / "ca.pem", tls / "coordinator-2.pem")
    assert again.tls


def test_every_process_serves_tls_with_its_own_certificate_and_requires_clients(
    tmp_path: Path,
) -> None:
    spec = load_or_create(tmp_path, 1, 1, coordinators=1, tls=True)
    commands = LocalCluster(spec, tmp_path).commands()
    configs = {
        "controller-1": (ControllerConfig, "controller"),
        "broker-1": (BrokerConfig, "broker"),
        "coordinator-1": (CoordinatorConfig, "coordinator"),
    }
    assert set(commands) == set(configs)
    for name, (config_class, service) in configs.items():
        config = load(config_class, service, commands[name][3:], {})  # past `python -m ...`
        assert config.security_protocol == "SSL"
        assert config.ssl_ca_location == str(tmp_path / "tls" / "ca.pem")
        assert config.ssl_certificate_location == str(tmp_path / "tls" / f"{name}.pem")
        assert config.ssl_key_location == str(tmp_path / "tls" / f"{name}-key.pem")
        assert config.ssl_client_auth == "required"


def test_the_client_settings_load_as_a_clients_tls(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 1, 1, tls=True)
    security = spec.client_security(tmp_path)
    assert security == {
        "security.protocol": "SSL",
        "ssl.ca.location": str(tmp_path / "tls" / "ca.pem"),
        "ssl.certificate.location": str(tmp_path / "tls" / "client.pem"),
        "ssl.key.location": str(tmp_path / "tls" / "client-key.pem"),
    }
    settings = TlsSettings.from_client_config(security)
    assert settings is not None and settings.certificate is not None


def test_a_plaintext_cluster_is_as_before(tmp_path: Path) -> None:
    spec = load_or_create(tmp_path, 1, 1, coordinators=1)
    assert not spec.tls
    assert spec.client_security(tmp_path) == {}
    assert not (tmp_path / "tls").exists()
    for command in LocalCluster(spec, tmp_path).commands().values():
        assert not [flag for flag in command if "ssl" in flag or "security" in flag]


def test_the_tls_flag_survives_json_and_old_files_are_plaintext(tmp_path: Path) -> None:
    spec = new_cluster_spec(1, 1, tls=True)
    assert ClusterSpec.from_json(spec.to_json()) == spec
    data = json.loads(spec.to_json())
    del data["tls"]  # a cluster.json written before TLS
    assert ClusterSpec.from_json(json.dumps(data)) == replace(spec, tls=False)
    data["tls"] = "yes"
    (tmp_path / "cluster.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"cluster\.json is not a cluster\.json .*'yes'"):
        load_or_create(tmp_path, 1, 1)


@pytest.mark.parametrize(("made", "asked"), [(True, False), (False, True)])
def test_a_data_directory_keeps_the_tls_it_was_made_with(
    tmp_path: Path, made: bool, asked: bool
) -> None:
    load_or_create(tmp_path, 1, 1, tls=made)
    expected = "made with --tls; start it with --tls" if made else "made without --tls"
    with pytest.raises(ValueError, match=expected):
        load_or_create(tmp_path, 1, 1, tls=asked)
    assert ClusterSpec.from_json((tmp_path / "cluster.json").read_text()).tls == made


class _ActiveController(controller_pb2_grpc.ControllerServiceServicer):
    def DescribeCluster(
        self, request: controller_pb2.DescribeClusterRequest, context: grpc.ServicerContext
    ) -> controller_pb2.DescribeClusterResponse:
        active = controller_pb2.DescribeClusterResponse.Controller(node_id=1, is_active=True)
        return controller_pb2.DescribeClusterResponse(controllers=[active])


def test_the_health_check_dials_a_tls_cluster_with_the_client_certificate(
    tmp_path: Path,
) -> None:
    spec = load_or_create(tmp_path, 1, 0, tls=True)
    tls = tmp_path / "tls"
    served = TlsSettings.load(
        ca_location=str(tls / "ca.pem"),
        certificate_location=str(tls / "controller-1.pem"),
        key_location=str(tls / "controller-1-key.pem"),
        client_auth="required",
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(_ActiveController(), server)
    port = server.add_secure_port("127.0.0.1:0", served.server_credentials())
    server.start()
    try:
        spec = replace(spec, controllers=(ControllerSpec(1, port, 0),))
        assert cluster_health(spec, tmp_path) == (True, "")
        # plaintext against the TLS listener: no answer
        healthy, missing = cluster_health(replace(spec, tls=False), tmp_path)
        assert (healthy, missing) == (False, "controller-1: UNAVAILABLE")
        with pytest.raises(ValueError, match="data directory"):
            cluster_health(spec)
    finally:
        server.stop(None)

"""Goal: a Spark pipeline reaches a cluster that requires a SASL/SCRAM login with the samsa.*
options a Kafka user sets for Spark (`samsa.security.protocol=SASL_SSL`, the CA,
`samsa.sasl.mechanism`, `samsa.sasl.username`, `samsa.sasl.password`): a DataFrame written with
`df.write.format("samsa")` is read back with `spark.read.format("samsa")` row for row, every
client of the driver and of the tasks logging in as the user (whose ACLs are the only grants);
with a wrong password the read fails, naming the failed login, instead of waiting out a timeout.

Method: a real local cluster (1 controller, 1 broker, 1 coordinator; TLS, SASL and the
authorizer on, as `samsa up --sasl --authorizer`; every process stopped by PID also on
failure), the user made and granted by admin with the SDK, and the real local Spark session
(conftest.py) whose tasks run in Python workers that log in themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from cluster_helpers import local_cluster, wait_until

from samsa.client import (
    AclBinding,
    Admin,
    ScramCredentialInfo,
    UserScramCredentialUpsertion,
)
from samsa.metadata.acls import Operation, PatternType, Permission, ResourceType

pytestmark = pytest.mark.timeout(300)

TOPIC = "spark-sasl"
ROWS = 50


@dataclass(frozen=True)
class SaslCluster:
    bootstrap: str
    ca: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslCluster]:
    data_dir = tmp_path_factory.mktemp("spark-sasl")
    with local_cluster(data_dir, 1, 1, coordinators=1, sasl=True, authorizer=True) as running:
        security = running.spec.client_security(data_dir)
        servers = running.spec.bootstrap_servers
        with Admin({"bootstrap.servers": servers, **security}) as admin:
            admin.create_topic(TOPIC, 2, 1)
            user = UserScramCredentialUpsertion("etl", ScramCredentialInfo("SCRAM-SHA-256"), "pw")
            assert admin.alter_user_scram_credentials([user]) == {"etl": None}
            topic = (ResourceType.TOPIC, TOPIC, PatternType.LITERAL, "User:etl", "*")
            grants = [
                AclBinding(*topic, op, Permission.ALLOW)
                for op in (Operation.WRITE, Operation.READ, Operation.DESCRIBE)
            ]
            assert set(admin.create_acls(grants).values()) == {None}
        yield SaslCluster(servers, security["ssl.ca.location"])


def login_options(cluster: SaslCluster, password: str = "pw") -> dict[str, str]:
    return {
        "samsa.bootstrap.servers": cluster.bootstrap,
        "samsa.security.protocol": "SASL_SSL",
        "samsa.ssl.ca.location": cluster.ca,
        "samsa.sasl.mechanism": "SCRAM-SHA-256",
        "samsa.sasl.username": "etl",
        "samsa.sasl.password": password,
    }


def test_a_pipeline_logs_in_to_write_and_read(spark, cluster: SaslCluster) -> None:  # type: ignore[no-untyped-def]
    rows = [(f"k{n}".encode(), f"v{n}".encode()) for n in range(ROWS)]
    frame = spark.createDataFrame(rows, "key binary, value binary")

    def written() -> bool:
        try:
            frame.write.format("samsa").options(**login_options(cluster)).option(
                "topic", TOPIC
            ).mode("append").save()
        except Exception as error:  # the grants may not have reached the broker yet
            if "AUTHORIZATION_FAILED" not in str(error):
                raise
            return False
        return True

    wait_until("etl's grants applied on the broker", written, timeout_s=120)
    options = login_options(cluster)
    read = spark.read.format("samsa").options(**options).option("subscribe", TOPIC).load()
    got = sorted((bytes(row.key), bytes(row.value)) for row in read.collect())
    assert got == sorted(rows)


def test_a_wrong_password_fails_the_read_naming_the_login(spark, cluster: SaslCluster) -> None:  # type: ignore[no-untyped-def]
    read = (
        spark.read.format("samsa")
        .options(**login_options(cluster, "wrong"))
        .option("subscribe", TOPIC)
        .load()
    )
    with pytest.raises(Exception, match="SASL authentication failed") as raised:
        read.collect()
    assert "etl" in str(raised.value)

"""Goal: `samsa quotas` reads its flags as kafka-configs.sh's client quotas do and prints what
Admin.describe_client_quotas answered in Kafka's words; a malformed command is a usage error
(exit 2) before any cluster is asked. The SDK's pure half (client_quota_admin.py) builds the
requests Admin sends and reads the answers back.

Method: `samsa.cli.main.main` with malformed flags and an address nothing listens on (the usage
error comes first, so nothing is dialled); the formatting function on a hand-built answer; the
pure request builders and answer readers on hand-built messages.
"""

from __future__ import annotations

import pytest

from samsa.cli.main import main as samsa_main
from samsa.cli.quota_commands import quota_lines
from samsa.client import QuotaEntity
from samsa.client.client_quota_admin import (
    alter_quotas_request,
    describe_quotas_request,
    quotas_of,
    raise_first_refusal,
)
from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--alter", "--add", "producer_byte_rate=1"], "--alter needs an entity: --user U or"),
        (["--describe", "--user", ""], "--user needs a user"),
        (["--alter", "--client-id", "a"], "needs --add KEY=N,... and/or --delete"),
        (["--alter", "--client-id", "a", "--add", "producer_byte_rate=x"], "is not KEY=N"),
        (["--alter", "--client-id", "a", "--add", "producer_byte_rate"], "is not KEY=N"),
        (["--describe", "--add", "producer_byte_rate=1"], "go with --alter"),
        (["--describe", "--client-id", ""], "--client-id needs a client.id"),
        (
            ["--alter", "--client-defaults", "--add", "k=1", "--delete", "k"],
            "both added and deleted",
        ),
    ],
)
def test_a_malformed_command_is_a_usage_error_before_the_cluster_is_asked(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert samsa_main(["quotas", "--bootstrap-server", "127.0.0.1:1", *flags]) == 2
    assert message in capsys.readouterr().err


def test_the_quotas_are_printed_as_kafka_prints_them() -> None:
    described = {
        QuotaEntity(client_id=QuotaEntity.DEFAULT): {"producer_byte_rate": 1e6},
        QuotaEntity(client_id="slow"): {"producer_byte_rate": 262144.0},
        QuotaEntity(user=QuotaEntity.DEFAULT): {"consumer_byte_rate": 5.0},
        QuotaEntity("CN=alice", "etl"): {"consumer_byte_rate": 6.0, "producer_byte_rate": 7.0},
    }
    assert quota_lines(described).splitlines() == [
        "Quota configs for the default client-id are producer_byte_rate=1000000.0",
        "Quota configs for client-id 'slow' are producer_byte_rate=262144.0",
        "Quota configs for the default user-principal are consumer_byte_rate=5.0",
        "Quota configs for user-principal 'CN=alice', client-id 'etl' are "
        "consumer_byte_rate=6.0, producer_byte_rate=7.0",
    ]


def test_the_alter_request_sets_numbers_and_removes_nones() -> None:
    request = alter_quotas_request(
        {"slow": {"producer_byte_rate": 262144, "consumer_byte_rate": None}}, False
    )
    [entry] = request.entries
    assert entry.entity == m.ClientQuotaEntity(client_id="slow")
    assert [(op.key, op.value, op.remove) for op in entry.ops] == [
        ("producer_byte_rate", 262144.0, False),
        ("consumer_byte_rate", 0.0, True),
    ]
    default = alter_quotas_request({None: {"producer_byte_rate": 5}}, True)
    assert default.entries[0].entity.default_client and default.validate_only
    with pytest.raises(ValueError, match="non-empty id"):
        alter_quotas_request({"": {"producer_byte_rate": 5}}, False)
    with pytest.raises(ValueError, match="no number"):
        alter_quotas_request({"a": {"producer_byte_rate": "5"}}, False)  # type: ignore[dict-item]


def test_a_refused_entity_raises_naming_it() -> None:
    response = c.AlterClientQuotasResponse()
    response.results.add(entity=m.ClientQuotaEntity(client_id="ok"))
    response.results.add(
        entity=m.ClientQuotaEntity(default_client=True),
        error_code=ErrorCode.INVALID_REQUEST,  # type: ignore[arg-type]
        error_message="unknown quota key 'x'",
    )
    with pytest.raises(KafkaError, match=r"the default client\.id: unknown quota key") as error:
        raise_first_refusal(response)
    assert error.value.code == ErrorCode.INVALID_REQUEST


def test_describe_filters_and_reads_the_answer() -> None:
    assert not describe_quotas_request(None, False, None, False, 7).HasField("entity")
    assert describe_quotas_request(None, False, "a", False, 7).entity.client_id == "a"
    assert describe_quotas_request(None, False, None, True, 7).entity.default_client
    pair = describe_quotas_request("u", False, "a", False, 7).entity
    assert pair == m.ClientQuotaEntity(user="u", client_id="a")
    assert describe_quotas_request(None, True, None, False, 7).entity.default_user
    with pytest.raises(ValueError, match="not both"):
        describe_quotas_request(None, False, "a", True, 7)
    with pytest.raises(ValueError, match="not both"):
        describe_quotas_request("u", True, None, False, 7)
    response = c.DescribeClientQuotasResponse()
    response.entries.add(entity=m.ClientQuotaEntity(default_client=True)).values["k"] = 1.0
    response.entries.add(entity=m.ClientQuotaEntity(client_id="a")).values["k"] = 2.0
    response.entries.add(entity=m.ClientQuotaEntity(user="u", client_id="a")).values["k"] = 3.0
    assert quotas_of(response) == {
        QuotaEntity(client_id=QuotaEntity.DEFAULT): {"k": 1.0},
        QuotaEntity(client_id="a"): {"k": 2.0},
        QuotaEntity("u", "a"): {"k": 3.0},
    }


def test_the_alter_request_takes_user_and_pair_entities() -> None:
    request = alter_quotas_request(
        {
            QuotaEntity(user="alice"): {"producer_byte_rate": 1},
            QuotaEntity(QuotaEntity.DEFAULT, "etl"): {"consumer_byte_rate": 2},
        },
        False,
    )
    assert [entry.entity for entry in request.entries] == [
        m.ClientQuotaEntity(user="alice"),
        m.ClientQuotaEntity(default_user=True, client_id="etl"),
    ]
    for bad in (QuotaEntity(), QuotaEntity(user="User:alice"), QuotaEntity(user=5), 3.5):
        with pytest.raises(ValueError):
            alter_quotas_request({bad: {"producer_byte_rate": 1}}, False)  # type: ignore[dict-item]

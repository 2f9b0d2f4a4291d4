"""Goal: a broker serves the client quota RPCs as a controller would (KIP-590): it forwards
AlterClientQuotas to the active controller and answers its answer, and answers
DescribeClientQuotas from its own replica of the metadata log, refusing a filter that names no
entity.

Method: the real BrokerMetadataServicer over the stand-in follower and channel of
test_broker_metadata_servicer.py, its image holding quotas committed by the real decision.
"""

from __future__ import annotations

import grpc
import pytest
from test_broker_metadata_servicer import (
    QUORUM,
    Aborted,
    FakeChannel,
    FakeContext,
    FakeFollower,
    cluster_image,
    commit,
    run,
    servicer,
)

from samsa.services.controller.quota_control import alter_client_quotas
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

Op = c.AlterClientQuotasRequest.Op


def alteration() -> c.AlterClientQuotasRequest:
    entity = m.ClientQuotaEntity(client_id="slow")
    entry = c.AlterClientQuotasRequest.Entry(
        entity=entity, ops=[Op(key="producer_byte_rate", value=1024)]
    )
    return c.AlterClientQuotasRequest(entries=[entry])


def test_alter_client_quotas_is_forwarded_and_the_answer_answered() -> None:
    answer = c.AlterClientQuotasResponse(status=c.ControllerStatus(metadata_offset=42))
    channel = FakeChannel(answer=answer)
    got = run(servicer(channel=channel).AlterClientQuotas(alteration(), FakeContext(3.0)))
    assert got is answer
    assert [(method, sent) for method, sent, _ in channel.forwarded] == [
        ("AlterClientQuotas", alteration())
    ]


def test_describe_client_quotas_reads_the_brokers_image() -> None:
    image = cluster_image()
    image = commit(image, alter_client_quotas(image, alteration()))
    service = servicer(follower=FakeFollower(image, QUORUM))
    request = c.DescribeClientQuotasRequest(min_metadata_offset=image.end_offset)
    got = run(service.DescribeClientQuotas(request, FakeContext()))
    assert [(e.entity.client_id, dict(e.values)) for e in got.entries] == [
        ("slow", {"producer_byte_rate": 1024})
    ]
    assert got.status.metadata_offset == image.end_offset
    with pytest.raises(Aborted) as refused:
        run(
            service.DescribeClientQuotas(
                c.DescribeClientQuotasRequest(entity=m.ClientQuotaEntity()), FakeContext()
            )
        )
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT

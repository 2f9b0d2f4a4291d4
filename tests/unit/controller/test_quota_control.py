"""Goal: AlterClientQuotas commits exactly the ClientQuotaRecords its entries ask for, refuses
with INVALID_REQUEST what Kafka refuses (an unknown key, a value that is not a whole number > 0,
a key changed twice, an entity named twice, an entity that is none), each entry on its own, and
DescribeClientQuotas reads the committed quotas back, filtered by entity, on a controller.

Method: the pure `alter_client_quotas` over images committed with the real replay; then the real
ControllerServicer (its quota mixin) over a stand-in driver that commits at once.
"""

from __future__ import annotations

import asyncio

import pytest
from test_control_plane import commit
from test_unregister_servicer import CommittingDriver

from samsa.common.errors import ErrorCode
from samsa.metadata.client_quotas import DEFAULT, DEFAULT_CLIENT, QuotaEntity
from samsa.metadata.image import MetadataImage
from samsa.services.controller import servicer
from samsa.services.controller.quota_control import alter_client_quotas
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m

Op = c.AlterClientQuotasRequest.Op
DEFAULT_CLIENT_ENTITY = m.ClientQuotaEntity(default_client=True)


def entry(entity: m.ClientQuotaEntity, *ops: Op) -> c.AlterClientQuotasRequest.Entry:
    return c.AlterClientQuotasRequest.Entry(entity=entity, ops=list(ops))


def client(client_id: str) -> m.ClientQuotaEntity:
    return m.ClientQuotaEntity(client_id=client_id)


def alter(image: MetadataImage, *entries: c.AlterClientQuotasRequest.Entry, validate=False):
    result = alter_client_quotas(
        image, c.AlterClientQuotasRequest(entries=list(entries), validate_only=validate)
    )
    return commit(image, result), result


def test_set_then_remove_commits_one_record_per_changed_key() -> None:
    image, result = alter(
        MetadataImage.empty(),
        entry(client("slow"), Op(key="producer_byte_rate", value=262144)),
        entry(DEFAULT_CLIENT_ENTITY, Op(key="consumer_byte_rate", value=1e6)),
    )
    assert [r.error_code for r in result.response.results] == [ErrorCode.NONE] * 2
    assert len(result.records) == 2
    assert image.client_quotas == {
        QuotaEntity(client_id="slow"): {"producer_byte_rate": 262144},
        DEFAULT_CLIENT: {"consumer_byte_rate": 1e6},
    }
    _, again = alter(image, entry(client("slow"), Op(key="producer_byte_rate", value=262144)))
    assert again.records == [], "a value already set changes nothing"
    image, removed = alter(
        image,
        entry(client("slow"), Op(key="producer_byte_rate", remove=True)),
        entry(client("slow2"), Op(key="consumer_byte_rate", remove=True)),  # not set: no-op
    )
    assert len(removed.records) == 1
    assert image.client_quotas == {DEFAULT_CLIENT: {"consumer_byte_rate": 1e6}}


def test_validate_only_answers_but_commits_nothing() -> None:
    _, result = alter(
        MetadataImage.empty(),
        entry(DEFAULT_CLIENT_ENTITY, Op(key="producer_byte_rate", value=5)),
        validate=True,
    )
    assert result.records == [] and result.response.results[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("ops", "words"),
    [
        ([Op(key="request_percentage", value=50)], "unknown quota key"),
        ([Op(key="producer_byte_rate", value=0)], "whole number"),
        ([Op(key="producer_byte_rate", value=-1)], "whole number"),
        ([Op(key="producer_byte_rate", value=10.5)], "whole number"),
        ([Op(key="producer_byte_rate", value=float("nan"))], "whole number"),
        (
            [Op(key="producer_byte_rate", value=1), Op(key="producer_byte_rate", remove=True)],
            "twice",
        ),
    ],
)
def test_a_bad_entry_is_refused_whole_and_the_others_apply(ops: list[Op], words: str) -> None:
    good = entry(client("ok"), Op(key="consumer_byte_rate", value=10))
    bad = entry(client("bad"), Op(key="consumer_byte_rate", value=10), *ops)
    image, result = alter(MetadataImage.empty(), bad, good)
    refused, applied = result.response.results
    assert refused.error_code == ErrorCode.INVALID_REQUEST and words in refused.error_message
    assert refused.entity == client("bad")
    assert applied.error_code == ErrorCode.NONE
    assert image.client_quotas == {QuotaEntity(client_id="ok"): {"consumer_byte_rate": 10}}


@pytest.mark.parametrize(
    "entity",
    [
        m.ClientQuotaEntity(),
        client(""),
        client("x" * 256),
        m.ClientQuotaEntity(user=""),
        m.ClientQuotaEntity(user="User:alice", client_id="c"),
        m.ClientQuotaEntity(user="x" * 513),
    ],
    ids=["none", "empty", "long", "empty-user", "principal-for-user", "long-user"],
)
def test_an_entity_that_is_none_is_refused(entity: m.ClientQuotaEntity) -> None:
    _, result = alter(MetadataImage.empty(), entry(entity, Op(key="producer_byte_rate", value=1)))
    assert result.records == []
    assert result.response.results[0].error_code == ErrorCode.INVALID_REQUEST


def test_an_entity_named_twice_is_refused_both_times() -> None:
    once = entry(client("a"), Op(key="producer_byte_rate", value=1))
    twice = entry(client("a"), Op(key="consumer_byte_rate", value=1))
    _, result = alter(
        MetadataImage.empty(),
        once,
        twice,
        entry(DEFAULT_CLIENT_ENTITY, Op(key="producer_byte_rate", value=2)),
    )
    codes = [r.error_code for r in result.response.results]
    assert codes == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, ErrorCode.NONE]


def test_user_and_pair_entities_are_their_own_entities() -> None:
    alice = m.ClientQuotaEntity(user="alice")
    pair = m.ClientQuotaEntity(user="alice", client_id="a")
    defaults = m.ClientQuotaEntity(default_user=True, default_client=True)
    image, result = alter(
        MetadataImage.empty(),
        entry(alice, Op(key="producer_byte_rate", value=1)),
        entry(pair, Op(key="producer_byte_rate", value=2)),
        entry(client("a"), Op(key="producer_byte_rate", value=3)),
        entry(defaults, Op(key="consumer_byte_rate", value=4)),
    )
    assert [r.error_code for r in result.response.results] == [ErrorCode.NONE] * 4
    assert image.client_quotas == {
        QuotaEntity("alice", None): {"producer_byte_rate": 1},
        QuotaEntity("alice", "a"): {"producer_byte_rate": 2},
        QuotaEntity(None, "a"): {"producer_byte_rate": 3},
        QuotaEntity(DEFAULT, DEFAULT): {"consumer_byte_rate": 4},
    }
    _, twice = alter(image, entry(pair, Op(key="producer_byte_rate", value=5)), entry(pair))
    assert [r.error_code for r in twice.response.results] == [ErrorCode.INVALID_REQUEST] * 2
    assert "user 'alice', client.id 'a' is named twice" in twice.response.results[0].error_message


class ReadingDriver(CommittingDriver):
    """Also serves reads: every offset it was asked for is applied (no wait)."""

    def metadata_offset_bound(self) -> int:
        return self.image.end_offset

    async def wait_for_offset(self, offset: int, timeout_s: float) -> bool:
        return offset <= self.image.end_offset


def _service(image: MetadataImage) -> servicer.ControllerServicer:
    service = object.__new__(servicer.ControllerServicer)
    service.driver = ReadingDriver(image)  # type: ignore[assignment]
    service.controller_endpoints, service.controller_internal_endpoints = {1: "h:1"}, {}
    return service


def test_the_controller_serves_both_rpcs() -> None:
    service = _service(MetadataImage.empty())
    request = c.AlterClientQuotasRequest(
        entries=[
            entry(client("b"), Op(key="producer_byte_rate", value=7)),
            entry(DEFAULT_CLIENT_ENTITY, Op(key="producer_byte_rate", value=9)),
            entry(client("a"), Op(key="consumer_byte_rate", value=8)),
        ]
    )
    written = asyncio.run(service.AlterClientQuotas(request, None))
    assert written.status.error_code == ErrorCode.NONE
    offset = written.status.metadata_offset
    everything = asyncio.run(
        service.DescribeClientQuotas(
            c.DescribeClientQuotasRequest(min_metadata_offset=offset), None
        )
    )
    assert [e.entity for e in everything.entries] == [
        DEFAULT_CLIENT_ENTITY,
        client("a"),
        client("b"),
    ]
    assert dict(everything.entries[2].values) == {"producer_byte_rate": 7}
    one = asyncio.run(
        service.DescribeClientQuotas(c.DescribeClientQuotasRequest(entity=client("a")), None)
    )
    assert [dict(e.values) for e in one.entries] == [{"consumer_byte_rate": 8}]
    nothing = asyncio.run(
        service.DescribeClientQuotas(c.DescribeClientQuotasRequest(entity=client("z")), None)
    )
    assert list(nothing.entries) == []

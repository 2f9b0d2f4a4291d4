"""Goal: CreateAcls, DeleteAcls and DescribeAcls decide as Kafka's controller does: each binding
or filter on its own (INVALID_REQUEST with the problem for an invalid one, the valid ones of the
same request applied), creating an existing binding a no-op success, DeleteAcls removing exactly
what each filter selects (one record per binding, a binding two filters select once), the
request and cluster bounds of common/limits.py, and SECURITY_DISABLED for all three while the
controller's authorization is off, with nothing committed.

Method: the pure decisions of acl_control.py over images committed with the real replay; then
the real ControllerServicer (its ACL mixin) over a stand-in driver that commits at once, with
authorizer_enabled both ways.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from test_control_plane import commit
from test_quota_control import ReadingDriver

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.acl_replay import binding_fields, binding_from, filter_fields
from samsa.metadata.acls import AclBinding, AclFilter, Operation, PatternType, Permission
from samsa.metadata.acls import ResourceType as R
from samsa.metadata.image import MetadataImage
from samsa.services.controller import servicer
from samsa.services.controller.acl_control import create_acls, delete_acls, describe_acls
from samsa.v1 import controller_pb2 as c


def acl(name: str, principal: str = "User:alice", operation=Operation.READ, **kw) -> AclBinding:
    return AclBinding(
        kw.get("resource_type", R.TOPIC),
        name,
        kw.get("pattern", PatternType.LITERAL),
        principal,
        kw.get("host", "*"),
        operation,
        kw.get("permission", Permission.ALLOW),
    )


def msg(binding: AclBinding) -> c.AclBinding:
    return c.AclBinding(**binding_fields(binding))


def flt(**kw) -> c.AclBindingFilter:
    return c.AclBindingFilter(**filter_fields(AclFilter(**kw)))


def create(image: MetadataImage, *bindings: c.AclBinding, enabled: bool = True):
    result = create_acls(
        image, c.CreateAclsRequest(creations=list(bindings)), authorizer_enabled=enabled
    )
    return commit(image, result), result


def delete(image: MetadataImage, *filters: c.AclBindingFilter, enabled: bool = True):
    result = delete_acls(
        image, c.DeleteAclsRequest(filters=list(filters)), authorizer_enabled=enabled
    )
    return commit(image, result), result


def codes(result) -> list[int]:
    return [r.error_code for r in result.response.results]


A, B, C = acl("orders"), acl("orders", "User:bob"), acl("pay-", pattern=PatternType.PREFIXED)


def test_valid_bindings_are_stored_and_invalid_ones_refused_each_on_its_own() -> None:
    bad_cluster = msg(acl("cluster-1", operation=Operation.ALTER, resource_type=R.CLUSTER))
    unset = msg(A)
    unset.operation = 0
    image, result = create(MetadataImage.empty(), msg(A), bad_cluster, msg(B), unset, msg(C))
    assert codes(result) == [0, ErrorCode.INVALID_REQUEST, 0, ErrorCode.INVALID_REQUEST, 0]
    assert "kafka-cluster" in result.response.results[1].error_message
    assert result.response.results[3].error_message == "operation is not set"
    assert len(result.records) == 3
    assert sorted(image.acls) == sorted([A, B, C])


def test_creating_an_existing_binding_succeeds_and_commits_nothing() -> None:
    image, _ = create(MetadataImage.empty(), msg(A))
    again, result = create(image, msg(A), msg(A))
    assert codes(result) == [0, 0]
    assert result.records == []
    assert again is image
    _, twice = create(MetadataImage.empty(), msg(B), msg(B))
    assert codes(twice) == [0, 0] and len(twice.records) == 1


def test_delete_removes_exactly_what_each_filter_selects() -> None:
    group = acl("g", operation=Operation.READ, resource_type=R.GROUP)
    image, _ = create(MetadataImage.empty(), msg(A), msg(B), msg(C), msg(group))
    bad = flt()
    bad.pattern_type = 0
    image, result = delete(
        image,
        flt(principal="User:bob"),
        bad,
        flt(resource_type=R.TOPIC, resource_name="orders"),
        flt(principal="User:nobody"),
    )
    assert codes(result) == [0, ErrorCode.INVALID_REQUEST, 0, 0]
    deleted = [[binding_from(b) for b in r.deleted] for r in result.response.results]
    assert deleted == [[B], [], [A, B], []], "B is answered under both filters"
    assert len(result.records) == 2, "one Remove record per binding, B once"
    assert sorted(image.acls) == sorted([C, group])
    # MATCH: the bindings that apply to a name, the prefixed one included.
    image, result = delete(image, flt(resource_name="pay-now", pattern_type=PatternType.MATCH))
    assert [binding_from(b) for b in result.response.results[0].deleted] == [C]
    assert list(image.acls) == [group]


def test_describe_answers_the_filtered_bindings_sorted() -> None:
    image, _ = create(MetadataImage.empty(), msg(C), msg(B), msg(A))
    answer = describe_acls(
        image, c.DescribeAclsRequest(filter=flt(resource_type=R.TOPIC)), authorizer_enabled=True
    )
    assert [binding_from(b) for b in answer.bindings] == sorted([A, B, C])


def test_security_disabled_refuses_all_three_and_commits_nothing() -> None:
    image, _ = create(MetadataImage.empty(), msg(A))
    for result in (
        create(image, msg(B), enabled=False)[1],
        delete(image, flt(), enabled=False)[1],
    ):
        assert result.records == []
        assert result.response.status.error_code == ErrorCode.SECURITY_DISABLED
        assert "authorizer.class.name" in result.response.status.error_message
        assert list(result.response.results) == []
    answer = describe_acls(image, c.DescribeAclsRequest(filter=flt()), authorizer_enabled=False)
    assert answer.status.error_code == ErrorCode.SECURITY_DISABLED
    assert list(answer.bindings) == []


def test_strings_over_their_limits_are_refused() -> None:
    long_name = msg(acl("t" * (limits.acl_name_length_max + 1)))
    long_principal = msg(acl("t", "User:" + "p" * limits.acl_principal_length_max))
    long_host = msg(acl("t", host="h" * (limits.acl_name_length_max + 1)))
    _, result = create(MetadataImage.empty(), long_name, long_principal, long_host, msg(A))
    assert codes(result) == [ErrorCode.INVALID_REQUEST] * 3 + [0]
    assert "limits.acl_principal_length_max" in result.response.results[1].error_message
    _, deleted = delete(MetadataImage.empty(), flt(host="h" * 300))
    assert codes(deleted) == [ErrorCode.INVALID_REQUEST]


def test_the_cluster_and_request_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "acl_bindings_max", 3)
    image, result = create(MetadataImage.empty(), *(msg(acl(f"t{i}")) for i in range(4)))
    assert codes(result) == [0, 0, 0, ErrorCode.INVALID_REQUEST]
    assert "limits.acl_bindings_max" in result.response.results[3].error_message
    monkeypatch.setattr(limits, "admin_request_items_max", 2)
    image, result = delete(image, flt(resource_name="t0"), flt(), flt(resource_name="t1"))
    assert codes(result) == [0, ErrorCode.INVALID_REQUEST, 0]
    assert sorted(image.acls) == [acl("t2")]


def _service(enabled: bool) -> servicer.ControllerServicer:
    service = object.__new__(servicer.ControllerServicer)
    service.driver = ReadingDriver(MetadataImage.empty())  # type: ignore[assignment]
    service.controller_endpoints, service.controller_internal_endpoints = {1: "h:1"}, {}
    service.authorizer_enabled = enabled
    return service


class Aborted(Exception):
    pass


class Context:
    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


def test_the_controller_serves_the_three_rpcs() -> None:
    service = _service(enabled=True)
    written = asyncio.run(service.CreateAcls(c.CreateAclsRequest(creations=[msg(A), msg(C)]), None))
    assert written.status.error_code == ErrorCode.NONE
    read = c.DescribeAclsRequest(filter=flt(), min_metadata_offset=written.status.metadata_offset)
    assert len(asyncio.run(service.DescribeAcls(read, Context())).bindings) == 2
    gone = asyncio.run(
        service.DeleteAcls(c.DeleteAclsRequest(filters=[flt(resource_name="pay-")]), None)
    )
    assert [binding_from(b) for b in gone.results[0].deleted] == [C]
    bad = flt()
    bad.operation = 0
    with pytest.raises(Aborted) as refused:
        asyncio.run(service.DescribeAcls(c.DescribeAclsRequest(filter=bad), Context()))
    assert refused.value.args[0] == grpc.StatusCode.INVALID_ARGUMENT
    too_many = c.CreateAclsRequest(creations=[msg(A)] * (limits.admin_request_items_max + 1))
    with pytest.raises(Aborted) as refused:
        asyncio.run(service.CreateAcls(too_many, Context()))
    assert refused.value.args[0] == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_controller_without_authorization_answers_security_disabled() -> None:
    service = _service(enabled=False)
    created = asyncio.run(service.CreateAcls(c.CreateAclsRequest(creations=[msg(A)]), None))
    assert created.status.error_code == ErrorCode.SECURITY_DISABLED
    assert service.driver.image.end_offset == 0, "nothing committed"
    deleted = asyncio.run(service.DeleteAcls(c.DeleteAclsRequest(filters=[flt()]), None))
    assert deleted.status.error_code == ErrorCode.SECURITY_DISABLED
    described = asyncio.run(service.DescribeAcls(c.DescribeAclsRequest(filter=flt()), Context()))
    assert described.status.error_code == ErrorCode.SECURITY_DISABLED
    assert object.__new__(servicer.ControllerServicer).authorizer_enabled is False, "off by default"

"""Admin's ACL calls, the pure half: CreateAcls, DescribeAcls and DeleteAcls requests from the
core's values (samsa.metadata.acls: AclBinding, AclFilter and their enums, which samsa.client
re-exports), and the answers back as Kafka's AdminClient gives them: per binding an error or
None, per filter the bindings it deleted or its error.

The controller checks each binding and filter (AclBinding.problem, AclFilter.problem, the length
limits) and answers INVALID_REQUEST for each one it refuses, applying the others; a controller
whose authorization is off refuses the whole call with SECURITY_DISABLED, raised as KafkaError.
Pure: admin_acls.py sends the requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from samsa.client.errors import KafkaError
from samsa.common.errors import ErrorCode
from samsa.metadata.acl_replay import binding_fields, binding_from, filter_fields
from samsa.metadata.acls import AclBinding, AclFilter
from samsa.v1 import controller_pb2 as c


class AclDeletion(NamedTuple):
    """One filter of delete_acls and what came of it: the bindings it deleted (sorted), or
    `error` when the controller refused the filter (then `deleted` is empty)."""

    acl_filter: AclFilter
    deleted: list[AclBinding]
    error: KafkaError | None = None


def _check(value: object, kind: type, what: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{what} takes {kind.__name__} values, not {type(value).__name__}")


def create_acls_request(
    bindings: Iterable[AclBinding],
) -> tuple[list[AclBinding], c.CreateAclsRequest]:
    """The bindings in order, and the request creating them."""
    bindings = list(bindings)
    for binding in bindings:
        _check(binding, AclBinding, "create_acls")
    request = c.CreateAclsRequest(creations=[c.AclBinding(**binding_fields(b)) for b in bindings])
    return bindings, request


def created(
    bindings: list[AclBinding], response: c.CreateAclsResponse
) -> dict[AclBinding, KafkaError | None]:
    """Each binding's refusal, or None once it exists (whether or not it existed before)."""
    outcome: dict[AclBinding, KafkaError | None] = {}
    for binding, result in zip(bindings, response.results, strict=True):
        error = None
        if result.error_code != ErrorCode.NONE:
            error = KafkaError.of(result.error_code, result.error_message)
        if outcome.get(binding) is None:
            outcome[binding] = error
    return outcome


def describe_acls_request(acl_filter: AclFilter, min_metadata_offset: int) -> c.DescribeAclsRequest:
    _check(acl_filter, AclFilter, "describe_acls")
    return c.DescribeAclsRequest(
        filter=c.AclBindingFilter(**filter_fields(acl_filter)),
        min_metadata_offset=min_metadata_offset,
    )


def described(response: c.DescribeAclsResponse) -> list[AclBinding]:
    """The bindings selected, sorted; KafkaError for a refusal (SECURITY_DISABLED)."""
    raise_status(response)
    return [binding_from(binding) for binding in response.bindings]


def delete_acls_request(
    filters: Iterable[AclFilter],
) -> tuple[list[AclFilter], c.DeleteAclsRequest]:
    """The filters in order, and the request deleting what they select."""
    filters = list(filters)
    for acl_filter in filters:
        _check(acl_filter, AclFilter, "delete_acls")
    request = c.DeleteAclsRequest(filters=[c.AclBindingFilter(**filter_fields(f)) for f in filters])
    return filters, request


def deleted(filters: list[AclFilter], response: c.DeleteAclsResponse) -> list[AclDeletion]:
    """Per filter, in order, the bindings it deleted or its refusal."""
    outcome = []
    for acl_filter, result in zip(filters, response.results, strict=True):
        if result.error_code != ErrorCode.NONE:
            error = KafkaError.of(result.error_code, result.error_message)
            outcome.append(AclDeletion(acl_filter, [], error))
        else:
            outcome.append(AclDeletion(acl_filter, [binding_from(b) for b in result.deleted]))
    return outcome


def raise_status(response: c.DescribeAclsResponse) -> None:
    if response.status.error_code != ErrorCode.NONE:
        raise KafkaError.of(response.status.error_code, response.status.error_message)

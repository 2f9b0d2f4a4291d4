"""ACL decisions: CreateAcls, DeleteAcls and DescribeAcls (KIP-11, KIP-290; KRaft's ACLs live in
the metadata log, KIP-801).

Theory of operation. ACL bindings are metadata: the active controller checks each binding (or
filter) of a request and answers it on its own, and commits one AccessControlEntryRecord per
binding created and one RemoveAccessControlEntryRecord per binding deleted, all in one batch
(metadata/acl_replay.py applies them). Every controller, broker and coordinator follows the log
and authorizes from its own image's `Acls`; nothing else is told.

Refused as a whole with SECURITY_DISABLED (Kafka's error 54, in the answer's status) while this
controller's authorization is off (`authorizer.class.name` unset): a rule stored while nobody
enforces it would give a false sense of safety, and would start to bite unseen the day
authorization is turned on. Otherwise, per binding or filter, INVALID_REQUEST with what to fix
for one the core refuses (AclBinding.problem, AclFilter.problem: ANY or MATCH in a binding, a
cluster not named kafka-cluster, an operation its resource type has not, ...), for an enum not
set, or for a string over its limit (common/limits.py); the valid ones of the same request are
applied. Creating a binding that exists (or naming one twice) succeeds and commits nothing more.
A creation that would take the cluster past limits.acl_bindings_max bindings is refused. Each
DeleteAcls filter deletes exactly the bindings `Acls.matching` selects in the image, each binding
once (a binding two filters select is answered under both); a filter whose bindings would take
the request past limits.admin_request_items_max deletions is refused (narrow it, or delete in
several requests), so every request commits as one bounded batch. DescribeAcls is a plain read
of the image. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from samsa.common import limits
from samsa.common.errors import ErrorCode
from samsa.metadata.acl_replay import (
    add_record,
    binding_fields,
    binding_from,
    filter_from,
    remove_record,
)
from samsa.metadata.acls import AclBinding, AclFilter
from samsa.metadata.image import MetadataImage
from samsa.services.controller.control_result import ControlResult
from samsa.v1 import controller_pb2 as c

SECURITY_DISABLED_MESSAGE = (
    "authorization is off on this controller (authorizer.class.name is not set), so ACLs would "
    "not be enforced: none are stored or listed. Set authorizer.class.name=standard on every "
    "process of the cluster first"
)

_LENGTHS = (
    ("resource_name", limits.acl_name_length_max, "acl_name_length_max"),
    ("principal", limits.acl_principal_length_max, "acl_principal_length_max"),
    ("host", limits.acl_name_length_max, "acl_name_length_max"),
)


def _length_problem(message: Any) -> str | None:
    for field, most, name in _LENGTHS:
        length = len(getattr(message, field))
        if length > most:
            return f"{field} is {length} characters; at most {most} (limits.{name})"
    return None


def binding_of(message: c.AclBinding) -> AclBinding | str:
    """The binding a request names, or why it cannot be stored."""
    problem = _length_problem(message)
    if problem is not None:
        return problem
    try:
        binding = binding_from(message)
    except ValueError as error:
        return str(error)
    return binding.problem() or binding


def filter_of(message: c.AclBindingFilter) -> AclFilter | str:
    """The filter a request names, or why it cannot be used."""
    problem = _length_problem(message)
    if problem is not None:
        return problem
    try:
        acl_filter = filter_from(message)
    except ValueError as error:
        return str(error)
    return acl_filter.problem() or acl_filter


def _refuse(response: Any, authorizer_enabled: bool) -> bool:
    """Set SECURITY_DISABLED on the answer's status while authorization is off."""
    if authorizer_enabled:
        return False
    response.status.error_code = ErrorCode.SECURITY_DISABLED
    response.status.error_message = SECURITY_DISABLED_MESSAGE
    return True


def create_acls(
    image: MetadataImage, request: c.CreateAclsRequest, *, authorizer_enabled: bool
) -> ControlResult[c.CreateAclsResponse]:
    """Each binding's AccessControlEntryRecord, or its refusal (see the module doc)."""
    response = c.CreateAclsResponse()
    if _refuse(response, authorizer_enabled):
        return ControlResult([], response)
    existing = frozenset(image.acls)
    added: dict[AclBinding, None] = {}  # in the request's order
    for message in request.creations:
        result = response.results.add()
        binding = binding_of(message)
        if isinstance(binding, str):
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, binding
        elif binding in existing or binding in added:
            continue
        elif len(existing) + len(added) >= limits.acl_bindings_max:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (
                f"the cluster holds {len(existing) + len(added)} ACL bindings, the most it "
                f"keeps (limits.acl_bindings_max): delete some, or use prefixed or wildcard ones"
            )
        else:
            added[binding] = None
    return ControlResult([add_record(binding) for binding in added], response)


def delete_acls(
    image: MetadataImage, request: c.DeleteAclsRequest, *, authorizer_enabled: bool
) -> ControlResult[c.DeleteAclsResponse]:
    """One RemoveAccessControlEntryRecord per binding the filters select, or each filter's
    refusal (see the module doc)."""
    response = c.DeleteAclsResponse()
    if _refuse(response, authorizer_enabled):
        return ControlResult([], response)
    deleted: dict[AclBinding, None] = {}  # in the order the filters select them
    most = limits.admin_request_items_max
    for message in request.filters:
        result = response.results.add()
        acl_filter = filter_of(message)
        if isinstance(acl_filter, str):
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, acl_filter
            continue
        selected = image.acls.matching(acl_filter)
        new = [binding for binding in selected if binding not in deleted]
        if len(deleted) + len(new) > most:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (
                f"this filter selects {len(selected)} ACL bindings, more than one request may "
                f"delete with the others ({most}, limits.admin_request_items_max): narrow "
                "it, or delete in several requests"
            )
            continue
        deleted.update(dict.fromkeys(new))
        for binding in selected:
            result.deleted.add(**binding_fields(binding))
    return ControlResult([remove_record(binding) for binding in deleted], response)


def describe_acls_problem(request: c.DescribeAclsRequest) -> str | None:
    """Why DescribeAcls' filter cannot be used (INVALID_ARGUMENT), or None."""
    acl_filter = filter_of(request.filter)
    if isinstance(acl_filter, str):
        return f"DescribeAcls' filter: {acl_filter} (ANY matches every value)"
    return None


def describe_acls(
    image: MetadataImage, request: c.DescribeAclsRequest, *, authorizer_enabled: bool
) -> c.DescribeAclsResponse:
    """The bindings the (valid: describe_acls_problem) filter selects, sorted; SECURITY_DISABLED
    while authorization is off."""
    response = c.DescribeAclsResponse()
    if _refuse(response, authorizer_enabled):
        return response
    acl_filter = filter_of(request.filter)
    assert not isinstance(acl_filter, str), acl_filter
    for binding in image.acls.matching(acl_filter):
        response.bindings.add(**binding_fields(binding))
    return response

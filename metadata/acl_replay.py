"""ACL bindings in the metadata log: records to and from samsa.metadata.acls values, their replay
into the image, and their place in snapshots.

Theory of operation. An ACL binding is a value: AccessControlEntryRecord adds it to the image's
`Acls`, RemoveAccessControlEntryRecord (the same seven fields) removes it. The proto enums carry
Kafka's numbers, the core's (samsa.metadata.acls), plus UNSPECIFIED = 0 where proto3 needs a
zero: 0 is "not set" and refused everywhere, never read as ANY, so a client that forgets a field
never selects (or deletes) more than it meant. ANY (resource type 1 is proto-only: the core says
None) and MATCH exist only in filters.

Replay refuses the batch (InvalidBatchError, replay.py's) of a record no binding can be: a
value outside the enums, ANY or MATCH, or an added binding AclBinding.problem refuses (`Acls`
holds no other); not the request limits, which the active controller checked before writing,
so a log written under other limits still replays. Adding a binding the image holds,
or removing one it does not hold, changes nothing (the controller writes neither; the running
hash, not replay, is what detects a log that differs). Snapshots carry every binding as an
AccessControlEntryRecord, in the bindings' sort order. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from samsa.metadata.acls import (
    AclBinding,
    AclFilter,
    Acls,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.v1 import metadata_pb2 as m

# The proto's ACL_RESOURCE_TYPE_ANY: the core spells it None (AclFilter.resource_type).
RESOURCE_TYPE_ANY = 1

_FILTER_ONLY_PATTERNS = (PatternType.ANY, PatternType.MATCH)


def _enum(kind: type, value: int, field: str) -> Any:
    if value == 0:
        raise ValueError(f"{field} is not set")
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{field} {value} is not one of Kafka's values") from None


def binding_from(message: Any) -> AclBinding:
    """The binding an AccessControlEntryRecord, RemoveAccessControlEntryRecord or controller
    AclBinding carries (their fields are the same); ValueError for a value no binding holds."""
    if message.resource_type == RESOURCE_TYPE_ANY:
        raise ValueError("resource_type ANY is for filters only: name a resource type")
    pattern = _enum(PatternType, message.pattern_type, "pattern_type")
    if pattern in _FILTER_ONLY_PATTERNS:
        raise ValueError(f"pattern_type {pattern.name} is for filters only: LITERAL or PREFIXED")
    operation = _enum(Operation, message.operation, "operation")
    if operation == Operation.ANY:
        raise ValueError("operation ANY is for filters only: name an operation, or ALL")
    permission = _enum(Permission, message.permission, "permission")
    if permission == Permission.ANY:
        raise ValueError("permission ANY is for filters only: ALLOW or DENY")
    return AclBinding(
        resource_type=_enum(ResourceType, message.resource_type, "resource_type"),
        resource_name=message.resource_name,
        pattern_type=pattern,
        principal=message.principal,
        host=message.host,
        operation=operation,
        permission=permission,
    )


def binding_fields(binding: AclBinding) -> dict[str, Any]:
    """The fields of `binding` as keyword arguments of any of the three messages."""
    return {
        "resource_type": int(binding.resource_type),
        "resource_name": binding.resource_name,
        "pattern_type": int(binding.pattern_type),
        "principal": binding.principal,
        "host": binding.host,
        "operation": int(binding.operation),
        "permission": int(binding.permission),
    }


def filter_from(message: Any) -> AclFilter:
    """The filter a controller AclBindingFilter carries; ValueError for an unset enum or a value
    outside Kafka's."""
    resource_type = None
    if message.resource_type != RESOURCE_TYPE_ANY:
        resource_type = _enum(ResourceType, message.resource_type, "resource_type")
    return AclFilter(
        resource_type=resource_type,
        resource_name=message.resource_name if message.HasField("resource_name") else None,
        pattern_type=_enum(PatternType, message.pattern_type, "pattern_type"),
        principal=message.principal if message.HasField("principal") else None,
        host=message.host if message.HasField("host") else None,
        operation=_enum(Operation, message.operation, "operation"),
        permission=_enum(Permission, message.permission, "permission"),
    )


def filter_fields(acl_filter: AclFilter) -> dict[str, Any]:
    """The fields of `acl_filter` as keyword arguments of a controller AclBindingFilter."""
    fields: dict[str, Any] = {
        "resource_type": RESOURCE_TYPE_ANY
        if acl_filter.resource_type is None
        else int(acl_filter.resource_type),
        "pattern_type": int(acl_filter.pattern_type),
        "operation": int(acl_filter.operation),
        "permission": int(acl_filter.permission),
    }
    for name in ("resource_name", "principal", "host"):
        if getattr(acl_filter, name) is not None:
            fields[name] = getattr(acl_filter, name)
    return fields


def add_record(binding: AclBinding) -> m.MetadataRecord:
    return m.MetadataRecord(
        access_control_entry=m.AccessControlEntryRecord(**binding_fields(binding))
    )


def remove_record(binding: AclBinding) -> m.MetadataRecord:
    return m.MetadataRecord(
        remove_access_control_entry=m.RemoveAccessControlEntryRecord(**binding_fields(binding))
    )


def snapshot_records(acls: Acls) -> list[m.MetadataRecord]:
    """Every binding as an AccessControlEntryRecord, in the bindings' sort order."""
    return [add_record(binding) for binding in sorted(acls)]


class AclChanges:
    """The ACL records of one batch (or snapshot), applied in order when the image is built: runs
    of adds and of removes each cost one new `Acls`, not one per record."""

    def __init__(self, acls: Acls) -> None:
        self._acls = acls
        self._ops: list[tuple[bool, AclBinding]] = []  # (added, binding), in record order

    def add(self, binding: AclBinding) -> None:
        self._ops.append((True, binding))

    def remove(self, binding: AclBinding) -> None:
        self._ops.append((False, binding))

    def build(self) -> Acls:
        acls, run, adding = self._acls, list[AclBinding](), True
        for added, binding in [*self._ops, (not adding, None)]:
            if added != adding:
                acls = acls.with_added(run) if adding else acls.without(run)
                run, adding = [], added
            if binding is not None:
                run.append(binding)
        if run:
            acls = acls.with_added(run) if adding else acls.without(run)
        return acls


class AclReplay:
    """The ACL records' part of replay.py's ImageBuilder, which dispatches on the record kind and
    names the error a record that does not fit raises (`record_error`, its InvalidBatchError)."""

    acls: AclChanges
    record_error: type[Exception]

    def _access_control_entry(
        self, record: m.AccessControlEntryRecord, offset: int, _: bool
    ) -> None:
        binding = self._acl_binding(record, offset)
        problem = binding.problem()
        if problem is not None:
            raise self.record_error(f"ACL record at {offset}: {problem}")
        self.acls.add(binding)

    def _remove_access_control_entry(
        self, record: m.RemoveAccessControlEntryRecord, offset: int, _: bool
    ) -> None:
        self.acls.remove(self._acl_binding(record, offset))

    def _acl_binding(self, record: Any, offset: int) -> AclBinding:
        try:
            return binding_from(record)
        except ValueError as error:
            raise self.record_error(f"ACL record at {offset}: {error}") from error

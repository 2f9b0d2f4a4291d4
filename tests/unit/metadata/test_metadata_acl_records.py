"""Goal: ACL bindings live in the metadata image as the AccessControlEntryRecords and
RemoveAccessControlEntryRecords of the log say, the same on every replica, and a snapshot keeps
them: an image with ACLs survives to_snapshot/from_snapshot whole, as a replica that loads a
snapshot (or a controller that restarts from its Raft dump) must see them.

Method: replay hand-made batches with the real `replay`; check `image.acls`, the refusals of
records no binding can be (an unset or unknown enum, ANY or MATCH, a binding the core refuses),
that adding twice and removing an absent binding change nothing, the proto <-> core conversions
of bindings and filters (proto 0 is never ANY), and the snapshot round trip.
"""

from __future__ import annotations

import pytest

from samsa.metadata.acl_replay import (
    add_record,
    binding_fields,
    binding_from,
    filter_fields,
    filter_from,
    remove_record,
)
from samsa.metadata.acls import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import InvalidBatchError, replay
from samsa.metadata.snapshot import from_snapshot, to_snapshot
from samsa.v1 import controller_pb2 as c
from samsa.v1 import metadata_pb2 as m


def binding(
    name: str = "orders",
    principal: str = "User:alice",
    operation: Operation = Operation.READ,
    *,
    resource_type: ResourceType = ResourceType.TOPIC,
    pattern: PatternType = PatternType.LITERAL,
    permission: Permission = Permission.ALLOW,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def applied(image: MetadataImage, *records: m.MetadataRecord) -> MetadataImage:
    return replay(image, make_batch(image, list(records), 1))


READ = binding()
WRITE_PREFIX = binding("orders-", operation=Operation.WRITE, pattern=PatternType.PREFIXED)
DENY_BOB = binding("*", "User:bob", Operation.ALL, permission=Permission.DENY)
CLUSTER = binding("kafka-cluster", operation=Operation.ALTER, resource_type=ResourceType.CLUSTER)


def test_records_add_and_remove_bindings() -> None:
    image = applied(MetadataImage.empty(), *(add_record(b) for b in (READ, WRITE_PREFIX, DENY_BOB)))
    assert sorted(image.acls) == sorted([READ, WRITE_PREFIX, DENY_BOB])
    image = applied(image, remove_record(WRITE_PREFIX), add_record(CLUSTER))
    assert sorted(image.acls) == sorted([READ, DENY_BOB, CLUSTER])
    assert image.acls.matching(AclFilter(principal="User:bob")) == [DENY_BOB]


def test_order_within_a_batch_is_kept() -> None:
    image = applied(MetadataImage.empty(), add_record(READ), remove_record(READ))
    assert len(image.acls) == 0
    image = applied(image, remove_record(READ), add_record(READ), add_record(READ))
    assert list(image.acls) == [READ]


def test_adding_twice_or_removing_an_absent_binding_changes_nothing() -> None:
    image = applied(MetadataImage.empty(), add_record(READ))
    again = applied(image, add_record(READ), remove_record(WRITE_PREFIX))
    assert again.acls == image.acls
    assert again.end_offset == image.end_offset + 2


def _record(**changes: int | str) -> m.MetadataRecord:
    record = m.AccessControlEntryRecord(**binding_fields(READ))
    for field, value in changes.items():
        setattr(record, field, value)
    return m.MetadataRecord(access_control_entry=record)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"resource_type": 0}, "resource_type is not set"),
        ({"resource_type": 1}, "resource_type ANY is for filters only"),
        ({"resource_type": 9}, "resource_type 9 is not one of Kafka's values"),
        ({"pattern_type": 0}, "pattern_type is not set"),
        ({"pattern_type": int(PatternType.MATCH)}, "pattern_type MATCH is for filters only"),
        ({"operation": int(Operation.ANY)}, "operation ANY is for filters only"),
        ({"operation": 13}, "operation 13 is not one of Kafka's values"),
        ({"permission": 0}, "permission is not set"),
        ({"permission": int(Permission.ANY)}, "permission ANY is for filters only"),
        ({"principal": "alice"}, "alice"),  # the core wants Type:name
        ({"host": ""}, "host is empty"),
    ],
)
def test_a_record_no_binding_can_be_refuses_its_batch(changes: dict, says: str) -> None:
    image = applied(MetadataImage.empty(), add_record(READ))
    with pytest.raises(InvalidBatchError, match=says):
        applied(image, add_record(CLUSTER), _record(**changes))
    assert list(image.acls) == [READ]


def test_a_remove_record_is_checked_too() -> None:
    record = m.RemoveAccessControlEntryRecord(**binding_fields(READ))
    record.operation = 0
    with pytest.raises(InvalidBatchError, match="operation is not set"):
        applied(MetadataImage.empty(), m.MetadataRecord(remove_access_control_entry=record))


def test_a_snapshot_keeps_the_acls() -> None:
    image = applied(MetadataImage.empty(), *(add_record(b) for b in (CLUSTER, DENY_BOB, READ)))
    image = applied(image, add_record(WRITE_PREFIX), remove_record(DENY_BOB))
    snapshot = to_snapshot(image)
    kinds = [r.WhichOneof("record") for r in snapshot.records]
    assert kinds == ["access_control_entry"] * 3
    assert [binding_from(r.access_control_entry) for r in snapshot.records] == sorted(image.acls)
    loaded = from_snapshot(snapshot)
    assert loaded == image
    assert sorted(loaded.acls) == sorted([CLUSTER, READ, WRITE_PREFIX])
    assert to_snapshot(loaded) == snapshot, "the same image writes the same snapshot"


def test_conversions_between_proto_and_core() -> None:
    for value in (READ, WRITE_PREFIX, DENY_BOB, CLUSTER):
        assert binding_from(c.AclBinding(**binding_fields(value))) == value
    for value in (
        AclFilter(),
        AclFilter(resource_type=ResourceType.GROUP, resource_name="g", principal="User:a"),
        AclFilter(host="10.0.0.1", pattern_type=PatternType.MATCH, operation=Operation.READ),
        AclFilter(resource_name="", permission=Permission.DENY),  # "" is a name, not "any"
    ):
        assert filter_from(c.AclBindingFilter(**filter_fields(value))) == value


def test_an_unset_filter_enum_is_refused_not_read_as_any() -> None:
    fields = filter_fields(AclFilter())
    for name in ("resource_type", "pattern_type", "operation", "permission"):
        with pytest.raises(ValueError, match=f"{name} is not set"):
            filter_from(c.AclBindingFilter(**{**fields, name: 0}))

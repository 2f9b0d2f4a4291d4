"""Admin's ACL methods (Kafka's AdminClient createAcls, describeAcls, deleteAcls): a base class
of Admin (admin.py), so that admin.py keeps to topics, partitions, the cluster and quotas. Each
method documents itself; acl_admin.py is the pure half, `self._controller` (controller_calls.py)
carries the calls: writes to the active controller, reads that see this client's writes. Brokers
do not forward these calls yet: `bootstrap.servers` must list a controller for them.
"""

from __future__ import annotations

from collections.abc import Iterable

from samsa.client import acl_admin
from samsa.client.acl_admin import AclDeletion
from samsa.client.controller_calls import ControllerCalls
from samsa.client.errors import KafkaError
from samsa.metadata.acls import AclBinding, AclFilter


class AclAdmin:
    """Admin's ACL methods, at the controllers."""

    _controller: ControllerCalls

    def create_acls(self, bindings: Iterable[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """Create ACL bindings: each binding's KafkaError (INVALID_REQUEST, saying what to fix)
        or None once it exists (creating one that exists succeeds). The valid bindings are
        created even when others are refused. KafkaError SECURITY_DISABLED, nothing created,
        when the cluster's authorization is off (authorizer.class.name unset)."""
        ordered, request = acl_admin.create_acls_request(bindings)
        if not ordered:
            return {}
        return acl_admin.created(ordered, self._controller.write("CreateAcls", request))

    def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The ACL bindings `acl_filter` selects (every binding without one), sorted. KafkaError
        INVALID_REQUEST for a filter that cannot be used, SECURITY_DISABLED while authorization
        is off."""
        offset = self._controller.metadata_offset
        request = acl_admin.describe_acls_request(acl_filter or AclFilter(), offset)
        return acl_admin.described(self._controller.read("DescribeAcls", request))

    def delete_acls(self, filters: Iterable[AclFilter]) -> list[AclDeletion]:
        """Delete the ACL bindings each filter selects: per filter, in order, an AclDeletion
        (the filter, the bindings it deleted, or its KafkaError when refused; the other filters
        still apply). A binding two filters select is deleted once, listed under both.
        KafkaError SECURITY_DISABLED while authorization is off."""
        ordered, request = acl_admin.delete_acls_request(filters)
        if not ordered:
            return []
        return acl_admin.deleted(ordered, self._controller.write("DeleteAcls", request))

"""The controller's ACL RPCs (CreateAcls, DescribeAcls, DeleteAcls), as a mixin of
ControllerServicer (servicer.py), whose helpers they use: writes go through `_write` (the driver:
NOT_CONTROLLER on a controller that is not active), reads wait for `min_metadata_offset` with
`_read_at`. The decisions are pure (acl_control.py), given whether this controller's
authorization is on (`authorizer_enabled`, from authorizer.class.name: off, every call answers
SECURITY_DISABLED). A request naming more than limits.admin_request_items_max bindings or
filters is refused whole, RESOURCE_EXHAUSTED, before anything is read."""

from __future__ import annotations

from typing import Any

import grpc

from samsa.common import limits
from samsa.common.request_counts import too_many
from samsa.services.controller import acl_control
from samsa.v1 import controller_pb2


class AclRpcs:
    """CreateAcls, DescribeAcls and DeleteAcls for ControllerServicer."""

    # Whether authorizer.class.name is set on this controller; off unless the constructor says.
    authorizer_enabled: bool = False
    _write: Any
    _read_at: Any
    _status: Any
    driver: Any

    async def CreateAcls(self, request, context):  # type: ignore[no-untyped-def]
        await _check_count(context, "ACL bindings", len(request.creations))
        enabled = self.authorizer_enabled
        return await self._write(
            controller_pb2.CreateAclsResponse,
            lambda image: acl_control.create_acls(image, request, authorizer_enabled=enabled),
        )

    async def DeleteAcls(self, request, context):  # type: ignore[no-untyped-def]
        await _check_count(context, "ACL filters", len(request.filters))
        enabled = self.authorizer_enabled
        return await self._write(
            controller_pb2.DeleteAclsResponse,
            lambda image: acl_control.delete_acls(image, request, authorizer_enabled=enabled),
        )

    async def DescribeAcls(self, request, context):  # type: ignore[no-untyped-def]
        if self.authorizer_enabled:
            problem = acl_control.describe_acls_problem(request)
            if problem is not None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
            await self._read_at(request.min_metadata_offset, context)
        response = acl_control.describe_acls(
            self.driver.image, request, authorizer_enabled=self.authorizer_enabled
        )
        status = response.status
        response.status.CopyFrom(self._status(status.error_code, status.error_message))
        return response


async def _check_count(context: grpc.aio.ServicerContext, what: str, count: int) -> None:
    message = too_many(count, what, limits.admin_request_items_max)
    if message is not None:
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

"""The controller's client quota RPCs (AlterClientQuotas, DescribeClientQuotas), as a mixin of
ControllerServicer (servicer.py), whose helpers they use: writes go through `_write` (the
driver: NOT_CONTROLLER on a controller that is not active), reads wait for
`min_metadata_offset` with `_read_at`. The decisions are pure: quota_control.py for the write,
services/runtime/metadata_reads.py for the read, which brokers answer too."""

from __future__ import annotations

from typing import Any

import grpc

from samsa.services.controller.quota_control import alter_client_quotas
from samsa.services.runtime import metadata_reads
from samsa.v1 import controller_pb2


class ClientQuotaRpcs:
    """AlterClientQuotas and DescribeClientQuotas for ControllerServicer."""

    _write: Any
    _check_count: Any
    _read_at: Any
    _status: Any
    driver: Any

    async def AlterClientQuotas(self, request, context):  # type: ignore[no-untyped-def]
        await self._check_count(context, "entries", len(request.entries))
        return await self._write(
            controller_pb2.AlterClientQuotasResponse,
            lambda image: alter_client_quotas(image, request),
        )

    async def DescribeClientQuotas(self, request, context):  # type: ignore[no-untyped-def]
        problem = metadata_reads.describe_client_quotas_problem(request)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        await self._read_at(request.min_metadata_offset, context)
        response = metadata_reads.describe_client_quotas(self.driver.image, request)
        response.status.CopyFrom(self._status())
        return response

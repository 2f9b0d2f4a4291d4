"""The controller's SCRAM credential RPCs (AlterUserScramCredentials,
DescribeUserScramCredentials), as a mixin of ControllerServicer (servicer.py), whose helpers they
use: the write goes through `_write` (NOT_CONTROLLER on a controller that is not active), the read
waits for `min_metadata_offset` with `_read_at`. A request naming more than
limits.admin_request_items_max changes or users is refused whole, RESOURCE_EXHAUSTED. The
decisions are pure: scram_control.py for the write, services/runtime/scram_reads.py for the read,
which brokers answer too."""

from __future__ import annotations

from typing import Any

from samsa.services.controller.scram_control import alter_user_scram_credentials
from samsa.services.runtime.scram_reads import describe_user_scram_credentials
from samsa.v1 import controller_pb2


class ScramRpcs:
    """AlterUserScramCredentials and DescribeUserScramCredentials for ControllerServicer."""

    _write: Any
    _check_count: Any
    _read_at: Any
    _status: Any
    driver: Any

    async def AlterUserScramCredentials(self, request, context):  # type: ignore[no-untyped-def]
        count = len(request.deletions) + len(request.upsertions)
        await self._check_count(context, "SCRAM credential changes", count)
        return await self._write(
            controller_pb2.AlterUserScramCredentialsResponse,
            lambda image: alter_user_scram_credentials(image, request),
        )

    async def DescribeUserScramCredentials(self, request, context):  # type: ignore[no-untyped-def]
        await self._check_count(context, "users", len(request.users))
        await self._read_at(request.min_metadata_offset, context)
        image = self.driver.image
        response = describe_user_scram_credentials(image.scram_credentials, request)
        response.status.CopyFrom(self._status())
        return response

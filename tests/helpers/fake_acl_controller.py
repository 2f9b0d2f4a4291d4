"""An active controller of a test's own making for ACL calls: the real pure decisions
(services/controller/acl_control.py) over an image it commits at once with the real replay, for
unit tests of the SDK's and the CLI's ACL calls. Shared through pytest's `pythonpath`."""

from __future__ import annotations

import threading

from samsa.metadata.image import MetadataImage
from samsa.metadata.records import make_batch
from samsa.metadata.replay import replay
from samsa.services.controller import acl_control
from samsa.v1 import controller_pb2 as c
from samsa.v1 import controller_pb2_grpc


class AclController(controller_pb2_grpc.ControllerServiceServicer):
    """The active controller: the real decisions, committed at once with the real replay."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.image = MetadataImage.empty()
        self.lock = threading.Lock()
        self.read_at: list[int] = []

    def _write(self, decide):  # type: ignore[no-untyped-def]
        with self.lock:
            result = decide(self.image)
            if result.records:
                self.image = replay(self.image, make_batch(self.image, result.records, 1))
            result.response.status.metadata_offset = self.image.end_offset
            return result.response

    def CreateAcls(self, request, context):  # type: ignore[no-untyped-def]
        enabled = self.enabled
        return self._write(
            lambda i: acl_control.create_acls(i, request, authorizer_enabled=enabled)
        )

    def DeleteAcls(self, request, context):  # type: ignore[no-untyped-def]
        enabled = self.enabled
        return self._write(
            lambda i: acl_control.delete_acls(i, request, authorizer_enabled=enabled)
        )

    def DescribeAcls(self, request, context):  # type: ignore[no-untyped-def]
        self.read_at.append(request.min_metadata_offset)
        return acl_control.describe_acls(self.image, request, authorizer_enabled=self.enabled)

    def DescribeCluster(self, request, context):  # type: ignore[no-untyped-def]
        # The CLI's reachability check asks this first.
        return c.DescribeClusterResponse()

"""Admin.describe_log_dirs, the I/O half: DescribeLogDirs at each broker directly.

The brokers and their endpoints come from DescribeCluster (read at or after Admin's last write,
controller_calls.py); a broker id not registered fails the call before anything is sent. Each
broker is then asked for its pages in turn (log_dirs.py merges them), each broker within a
deadline of its own (coordinator_calls.py's deadlines), so that a broker that is down spends its
own request.timeout.ms and not the time of the brokers asked after it. A broker that does not
answer is asked again, from the page it was at, until that deadline; a request it refuses
for what it is (INVALID_ARGUMENT, RESOURCE_EXHAUSTED) fails at once (INVALID_REQUEST), since
every broker would refuse it the same. Every broker is
asked even when one fails: the first failure is raised, its `errors` naming each broker that
failed (one refusal hides no other outcome, as for Admin's other calls about many items).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import grpc

from samsa.client.cluster_metadata import REFUSED_AS_SENT
from samsa.client.controller_calls import ControllerCalls
from samsa.client.coordinator_calls import CoordinatorCalls, status
from samsa.client.errors import KafkaError, first_of
from samsa.client.log_dirs import LogDirDescription, brokers_to_ask, log_dirs_request, merge_page
from samsa.client.refusals import authorization_error
from samsa.common.errors import ErrorCode
from samsa.v1 import broker_pb2, broker_pb2_grpc

LogDirs = dict[str, LogDirDescription]


class LogDirCalls:
    """Admin.describe_log_dirs: DescribeLogDirs at each broker asked."""

    def __init__(self, calls: CoordinatorCalls, controller: ControllerCalls) -> None:
        self._calls = calls
        self._controller = controller

    def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None,
        topics: Iterable[str] | None,
        partition_limit: int = 0,
    ) -> dict[int, LogDirs]:
        """Each broker's log directories by path (see the module doc); `partition_limit`: the
        most replicas a page carries (0: the broker's maximum), for tests of the paging."""
        brokers = self._controller.describe_cluster().brokers
        targets = brokers_to_ask(broker_ids, {b.broker_id: b.endpoint for b in brokers})
        request = log_dirs_request(topics, partition_limit)
        described: dict[int, LogDirs] = {}
        failed: dict[int, KafkaError] = {}
        for broker_id, endpoint in targets.items():
            try:
                deadline = self._calls.deadline()  # each broker its own (see the module doc)
                described[broker_id] = self._describe_one(broker_id, endpoint, request, deadline)
            except KafkaError as error:
                failed[broker_id] = error
        first = first_of(failed)
        if first is not None:
            raise first
        return described

    def _describe_one(
        self,
        broker_id: int,
        endpoint: str,
        first_request: broker_pb2.DescribeLogDirsRequest,
        deadline: float,
    ) -> LogDirs:
        """One broker's directories, every page read."""
        stub = broker_pb2_grpc.BrokerServiceStub(self._calls.channels.get(endpoint))
        request = broker_pb2.DescribeLogDirsRequest()
        request.CopyFrom(first_request)
        described: LogDirs = {}
        while True:
            try:
                page = stub.DescribeLogDirs(request, timeout=self._calls.attempt_s(deadline))
            except grpc.RpcError as failure:
                if failure.code() in REFUSED_AS_SENT:  # every broker would refuse it the same
                    raise KafkaError(failure.details() or "", ErrorCode.INVALID_REQUEST) from None
                if refused := authorization_error(failure):  # so would every server
                    raise refused from None
                if time.monotonic() >= deadline:
                    raise KafkaError(
                        f"broker {broker_id} at {endpoint} did not describe its log dirs within "
                        f"{self._calls.within} ({status(failure)})",
                        ErrorCode.BROKER_NOT_AVAILABLE,
                    ) from None
                self._calls.wait_before_retry()
                continue
            merge_page(described, page)
            if not page.HasField("next_cursor"):
                return described
            request.cursor.CopyFrom(page.next_cursor)

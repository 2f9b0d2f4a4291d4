"""Goal: a failed grpc.aio call reads as its status, as a sync call's does. grpc.aio's
AioRpcError is not a grpc.Call, so code that asked `isinstance(error, grpc.Call)` took its
refusals for a broken connection: a log line or a give-up message carried grpc's multi-line
debug dump instead of "CODE: details", and a port serving another gRPC service (UNIMPLEMENTED)
was retried until the deadline instead of refused at once."""

from __future__ import annotations

import grpc
import grpc.aio

from samsa.client.cluster_metadata import unreachable_reason
from samsa.client.coordinator_calls import status


def aio_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def test_an_aio_failure_reads_as_its_code_and_details() -> None:
    error = aio_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "send at most 1000")
    assert status(error) == "RESOURCE_EXHAUSTED: send at most 1000"


def test_an_aio_answer_from_another_grpc_service_is_not_retried() -> None:
    reason, retriable = unreachable_reason(aio_error(grpc.StatusCode.UNIMPLEMENTED, "no method"))
    assert (reason, retriable) == ("a gRPC service other than Samsa answers there", False)


def test_an_aio_timeout_is_retried() -> None:
    _, retriable = unreachable_reason(aio_error(grpc.StatusCode.DEADLINE_EXCEEDED, "late"))
    assert retriable

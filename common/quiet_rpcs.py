"""The RPCs that run all the time whether or not anything happens: heartbeats, metadata polls,
long-poll fetches and health checks. Traced on their own, each would be a root span several times
a second per process, and the exporter would hold little else (DESIGN §9). So a call of one of
these is traced only when its caller is inside a trace already: the services' sampler drops their
root spans (services/runtime/sampling.py), and the SDK does not intercept them at all (a poll is
traced per record instead, record_tracing.py). Named as gRPC's full method names, which are the
OpenTelemetry gRPC instrumentation's span names.
"""

from __future__ import annotations

QUIET_METHODS = frozenset(
    {
        "/samsa.v1.ControllerService/BrokerHeartbeat",
        "/samsa.v1.ControllerService/CoordinatorHeartbeat",
        "/samsa.v1.ControllerService/FetchMetadata",
        "/samsa.v1.BrokerService/Fetch",
        "/samsa.v1.BrokerService/FetchStream",
        "/samsa.v1.BrokerService/ReplicaFetchStream",
        "/samsa.v1.GroupCoordinatorService/ConsumerGroupHeartbeat",
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
    }
)


# Streams that live as long as a connection and carry one request per message: a span per stream
# would time the connection, not a request, while the interceptor that makes it costs every
# message (grpc.aio wraps an intercepted call's messages in Python). So neither side intercepts
# them; a produce request is traced per message instead (`ProduceStreamRequest.traceparent`),
# fetches are quiet anyway, a transaction's markers and a broker's checks at the coordinator are
# traced as the steps around them, and a producer that traces ends its transactions with unary
# calls (the SDK's transaction_client.py).
CONNECTION_STREAMS = frozenset(
    {
        "/samsa.v1.BrokerService/ProduceStream",
        "/samsa.v1.BrokerService/FetchStream",
        "/samsa.v1.BrokerService/ReplicaFetchStream",
        "/samsa.v1.BrokerService/WriteTxnMarkersStream",
        "/samsa.v1.TransactionCoordinatorService/AddPartitionsToTxnStream",
        "/samsa.v1.TransactionCoordinatorService/TransactionStream",
    }
)


def is_quiet(method: str) -> bool:
    """True for a full method name ("/package.Service/Method") of QUIET_METHODS."""
    return method in QUIET_METHODS

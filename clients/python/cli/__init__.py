"""The `samsa` command line. gRPC's experiments are chosen before anything imports grpc
(common/grpc_experiments.py)."""

from samsa.common.grpc_experiments import prefer_legacy_poller

prefer_legacy_poller()

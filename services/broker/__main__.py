"""`python -m samsa.services.broker`: see main.py. gRPC's experiments are chosen
before anything imports grpc (common/grpc_experiments.py)."""

import sys

from samsa.common.grpc_experiments import prefer_legacy_poller, quiet_core_logs

prefer_legacy_poller()
quiet_core_logs()

from samsa.services.broker.main import main  # noqa: E402  (after the experiments are chosen)

sys.exit(main())

"""Goal: the SDK's producer and consumer cores stay pure (STYLE.md habit 1) so a thin asyncio
driver can run them and tests can drive them with numbers for time.

Method: parse each core module's imports with `ast` (nothing is executed) and fail on any module
that does I/O, keeps time, spawns threads or draws module-level randomness. (tests/unit/
test_import_direction.py applies the same rule to common/, metadata/ and services/.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[3] / "clients" / "python" / "samsa_client"
CORE_MODULES = (
    "partitioner.py",
    "config.py",
    "accumulator.py",
    "producer_batch.py",
    "record_batcher.py",
    "record_checks.py",
    "batch_completion.py",
    "producer_sequences.py",
    "retry_policy.py",
    "group_member.py",
    "heartbeat_fields.py",
    "fetch_state.py",
    "fetch_partitions.py",
    "auto_commit_memory.py",
    "fetch_answers.py",
    "offset_resets.py",
    "topic_identities.py",
    "metadata_topics.py",
    "consumer_records.py",
    "rebalance.py",
    "cluster_admin.py",
    "reassignments.py",
    "leader_elections.py",
    "metadata_quorum.py",
    "partition_outcomes.py",
    "group_admin.py",
    "transaction_admin.py",
    "transaction_manager.py",
    "log_dirs.py",
    "client_quota_admin.py",
    "acl_admin.py",
    "scram_admin.py",
    "inflight_calls.py",
    "config_resources.py",
    "sasl_session.py",
    "oidc_token.py",
)
FORBIDDEN = {
    "asyncio",
    "concurrent",
    "grpc",
    "io",
    "multiprocessing",
    "os",
    "pathlib",
    "random",
    "selectors",
    "socket",
    "subprocess",
    "threading",
    "time",
}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_imports_nothing_impure(module: str) -> None:
    assert _imported_roots(SDK / module) & FORBIDDEN == set()


def test_the_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "core.py"
    module.write_text("import random\nfrom time import monotonic\n")
    assert _imported_roots(module) & FORBIDDEN == {"random", "time"}

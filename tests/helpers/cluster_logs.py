"""What the services of a test's local clusters logged, for the report of a test that failed.

A test against a real cluster that fails in CI leaves nothing behind but its assertion: the
machine and its temporary directories are gone. The conftest hooks here remember the data
directory of every LocalCluster that starts a process (`LocalCluster.start` is wrapped for the
session) and, when a test fails, add a report section with what those clusters' services logged:
every warning and error, and the last lines of each log. Clusters count while they run and when
they were started during the failing test (a cluster in a `with` block is stopped before the
report is made); a cluster whose processes have all stopped no longer counts for later tests.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.cli.launcher import LocalCluster

WARNINGS_PER_LOG = 40
LAST_LINES_PER_LOG = 15
REPORT_CHARS_MAX = 60_000

_started_this_test: set[Path] = set()
_running: dict[int, LocalCluster] = {}


def track_clusters() -> Iterator[None]:
    """For a session-scoped fixture: remember every cluster that starts a process."""
    start = LocalCluster.start

    def tracking_start(self: LocalCluster, name: str) -> subprocess.Popen[bytes]:
        for key in [key for key, cluster in _running.items() if not _alive(cluster)]:
            del _running[key]  # stopped since: it no longer counts
        _running[id(self)] = self
        _started_this_test.add(self.data_dir)
        return start(self, name)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalCluster, "start", tracking_start)
        yield


def begin_test() -> None:
    """Called as each test begins: clusters started before it count only while they run."""
    _started_this_test.clear()


def report() -> str:
    """Each relevant cluster's warnings and errors and the last lines of each service's log."""
    parts: list[str] = []
    live = {cluster.data_dir for cluster in _running.values() if _alive(cluster)}
    for data_dir in sorted(live | _started_this_test):
        for path in sorted((data_dir / "logs").glob("*.log")):
            parts.append(f"--- {path}\n{_summary(path)}")
    text = "\n".join(parts)
    if len(text) > REPORT_CHARS_MAX:
        text = "[... cut ...]\n" + text[-REPORT_CHARS_MAX:]
    return text


def _alive(cluster: LocalCluster) -> bool:
    return any(process.poll() is None for process in cluster.processes.values())


def _summary(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as error:
        return f"(unreadable: {error})"
    warnings = [line for line in lines if _level(line) not in ("INFO", "DEBUG")]
    tail = lines[-LAST_LINES_PER_LOG:]
    shown = warnings[-WARNINGS_PER_LOG:]
    out = [f"{len(warnings)} warnings or errors (last {len(shown)}):", *shown]
    out += [f"last {len(tail)} of {len(lines)} lines:", *tail]
    return "\n".join(out)


def _level(line: str) -> str:
    """A JSON log line's level; a line that is not JSON (a traceback) counts as an error."""
    try:
        return str(json.loads(line).get("level", "ERROR"))
    except (ValueError, AttributeError):
        return "ERROR"

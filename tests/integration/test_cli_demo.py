"""Goal: the README's run command works: `samsa demo` (the installed console script, in a real
process) writes a log on disk, reads it back intact, and a second run continues after the first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SAMSA = Path(sys.executable).with_name("samsa")


def run_demo(data_dir: Path, records: int) -> str:
    completed = subprocess.run(
        [str(SAMSA), "demo", "--data-dir", str(data_dir), "--records", str(records)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_the_demo_appends_reads_back_and_resumes(tmp_path: Path) -> None:
    first = run_demo(tmp_path, 3_000)
    assert "read back       3,000 records, every key and value identical" in first
    assert "time lookup     first record stamped at or after this run began is at offset 0" in first
    assert "reopened        log_end_offset=3000 (was 0" in first
    assert sorted(path.name for path in (tmp_path / "demo-0").glob("*.log"))[0] == (
        "00000000000000000000.log"
    )

    second = run_demo(tmp_path, 1_001)
    assert "opened at       log_start_offset=0 log_end_offset=3000" in second
    assert "first record stamped at or after this run began is at offset 3000" in second
    assert "reopened        log_end_offset=4001 (was 3000" in second


def test_the_demo_refuses_a_bad_record_count(tmp_path: Path) -> None:
    completed = subprocess.run(
        [str(SAMSA), "demo", "--data-dir", str(tmp_path), "--records", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "--records must be at least 1" in completed.stderr
    assert not (tmp_path / "demo-0").exists()

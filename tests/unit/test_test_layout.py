"""Goal: every test module's file name is unique across tests/, so that one pytest session can
collect all of them (tests/ has no __init__.py: pytest imports each module by its base name, and
a second `test_x.py` elsewhere fails the whole collection with "import file mismatch").

Method: list tests/**/test_*.py and compare base names.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_file_name() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    twice = sorted(name for name, count in names.items() if count > 1)
    assert twice == [], f"rename one of each: {twice}"

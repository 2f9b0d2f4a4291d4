"""The fuzz tests drive a real cluster with tests/integration's helpers: put them on the path."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

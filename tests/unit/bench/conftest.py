"""The bench package lives at the repository root, outside the installed `samsa.*` namespace:
make it importable however pytest is started (`python -m pytest` adds the cwd, `pytest` does
not)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

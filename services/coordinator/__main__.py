"""`python -m samsa.services.coordinator`: see main.py."""

import sys

from samsa.services.coordinator.main import main

sys.exit(main())

"""`python -m samsa.services.controller`: see main.py."""

import sys

from samsa.services.controller.main import main

sys.exit(main())

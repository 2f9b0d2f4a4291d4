"""`python -m samsa.services.broker`: see main.py."""

import sys

from samsa.services.broker.main import main

sys.exit(main())

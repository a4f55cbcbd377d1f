"""``python -m mvtable.connector.cli``."""

import sys

from .main import main

sys.exit(main())

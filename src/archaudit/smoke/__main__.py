"""python -m archaudit.smoke: the smoke command without the rest of the CLI."""

import sys

from .runner import main

sys.exit(main())

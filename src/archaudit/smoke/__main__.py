"""python -m archaudit.smoke: the smoke command without the rest of the CLI."""

import sys

from ..cli.main_smoke import main

sys.exit(main())

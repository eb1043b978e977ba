"""python -m daskgb: the daskgb command (daskgb/cli.py)."""

import sys

from .cli import main

sys.exit(main())

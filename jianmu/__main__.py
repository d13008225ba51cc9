"""``python -m jianmu``: the ``jianmu`` command, for an environment without its script."""

import sys

from jianmu.cli import main

sys.exit(main())

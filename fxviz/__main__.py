"""``python -m fxviz``: the same command line as the ``fxviz`` script."""

import sys

from fxviz.cli import main

sys.exit(main())

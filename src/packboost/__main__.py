"""``python -m packboost``: the command line of :mod:`packboost.cli`."""

import sys

from packboost.cli import main

if __name__ == "__main__":
    sys.exit(main())

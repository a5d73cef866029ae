"""``python -m lsdask``: the ``lsdask`` command line (see :mod:`lsdask.cli`)."""

from __future__ import annotations

import sys

from lsdask.cli import main

if __name__ == "__main__":
    sys.exit(main())

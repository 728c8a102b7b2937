"""``python -m capnb``: the ``capnb`` command."""

import sys

from .cli import main

sys.exit(main())

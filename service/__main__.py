"""``python -m service``: the same CLI as the ``logcleaner`` script."""

from __future__ import annotations

import sys

from service.cli import main

sys.exit(main())

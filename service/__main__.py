"""``python -m service``: the same CLI as the ``logcleaner`` script."""

from __future__ import annotations

from service.cli import exit_process, main

exit_process(main())

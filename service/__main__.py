"""``python -m service``: the same CLI as the ``logcleaner`` script."""

from __future__ import annotations

from service.shell.cli import exit_process, main

exit_process(main())

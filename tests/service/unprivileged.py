"""Commands run as a user who cannot read what a test locked away: as root (who reads any dir) through
``setpriv`` as ``nobody``, else as the test's own user; and a folder such a user may enter."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["as_unprivileged", "open_folder"]


def as_unprivileged(args: Sequence[str]) -> list[str]:
    """``args`` to run as a user that file permissions apply to."""
    if os.geteuid() == 0:
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *args]
    return list(args)


@contextmanager
def open_folder() -> Iterator[Path]:
    """A folder under the system's temporary dir that any user may enter and read (pytest's ``tmp_path``
    is its owner's only); removed at the end, whatever permissions the test left inside."""
    folder = Path(tempfile.mkdtemp(prefix="logcleaner-unprivileged-"))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(folder)

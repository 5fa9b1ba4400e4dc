"""Which program holds a TCP port, from ``/proc`` (Linux): named when ``serve`` cannot listen on its port.

``/proc/net/tcp`` and ``tcp6`` list each socket's local port, state and inode; ``/proc/<pid>/fd`` links
name the inodes each process holds. Where either cannot be read (another OS, another user's process),
nothing is said rather than a guess.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["port_owner"]

_LISTEN = "0A"
_PROC = Path("/proc")


def port_owner(port: int, proc: Path = _PROC) -> str | None:
    """``"java (pid 4242, org.apache.spark.deploy.master.Master)"`` for the process listening on ``port``,
    or None if ``/proc`` does not tell."""
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        if _holds_any(pid_dir, inodes):
            return _describe(pid_dir)
    return None


def _holds_any(pid_dir: Path, inodes: set[str]) -> bool:
    """Whether the process holds a socket of ``inodes`` (False if its fds cannot be read)."""
    with contextlib.suppress(OSError), os.scandir(pid_dir / "fd") as fds:
        for fd in fds:
            target = os.readlink(fd.path)
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    return False


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in (proc / "net" / table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def _describe(pid_dir: Path) -> str:
    args = [a for a in (pid_dir / "cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    name = os.path.basename(args[0]) if args else "?"
    main_class = next((a for a in args[1:] if a.count(".") >= 2 and not a.startswith("-")), None)
    return f"{name} (pid {pid_dir.name}" + (f", {main_class})" if main_class else ")")

"""A log's groups taken one at a time by its rewrite tasks, the costliest first, so the tasks end together.

A log mapped by key hash is rewritten by several tasks at once. A cut fixed before they start can only
guess what each group costs (what it keeps re-encoded and written costs several times what it drops, and
by how much moves with the machine), and the task with the costlier range then runs alone at the end.
Instead each task takes its next group from the log's claims file when it is free: the group of the
highest estimated cost (``rewrite_ranges.rewrite_costs``) that no task has taken. A misestimate then only
changes the order, and the tasks end within about one of the cheapest groups of each other.

The file (``<round end offset>.claims.cleaned`` in the log's dir: a ``.cleaned`` name, which the loader
deletes after a crash) holds one little-endian int32 per group: 0 while free, else the Spark partition
that took it, plus one. A task takes a group under the file's exclusive ``flock``. A retried attempt of a
partition first takes again every group an earlier attempt of its partition took, since the failed
attempt's rows never reached the driver. Tasks create the file; the driver removes it before the job and
after (``partial_maps``' map files follow the same rule, and the round's ticket guarantees no task writes
it after the driver removed it).
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Generator, Sequence

__all__ = ["claimed_groups", "claims_path"]

_ENTRY = struct.Struct("<i")


def claims_path(directory: str, end_offset: int) -> str:
    return os.path.join(directory, f"{end_offset:020d}.claims.cleaned")


def claimed_groups(
    path: str, partition: int, slots: Sequence[int], costs: Sequence[float]
) -> Generator[int, None, None]:
    """The slots this task cleans, each taken when the task asks for it: first those earlier attempts of
    ``partition`` took, then the free one of the highest cost, until none is free."""
    mine = partition + 1
    order = sorted(range(len(slots)), key=lambda i: (-costs[i], i))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        taken_here: set[int] = set()
        while True:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                owners = _read_owners(fd, len(slots))
                again = [i for i in order if owners[i] == mine and i not in taken_here]
                free = [i for i in order if owners[i] == 0]
                pick = again[0] if again else free[0] if free else None
                if not again and pick is not None:
                    _claim(fd, pick, mine, path)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            if pick is None:
                return
            taken_here.add(pick)
            yield slots[pick]
    finally:
        os.close(fd)


def _read_owners(fd: int, groups: int) -> list[int]:
    """Each group's owner (0: free); a file shorter than that (new, or never written that far) reads 0."""
    data = os.pread(fd, groups * _ENTRY.size, 0).ljust(groups * _ENTRY.size, b"\0")
    return [owner for (owner,) in _ENTRY.iter_unpack(data)]


def _claim(fd: int, index: int, owner: int, path: str) -> None:
    if os.pwrite(fd, _ENTRY.pack(owner), index * _ENTRY.size) != _ENTRY.size:
        raise OSError(f"{path}: a claim was written short")

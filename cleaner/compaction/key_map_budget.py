"""The key map's memory bound: one cleaner thread's share of ``log.cleaner.dedupe.buffer.size``.

Kafka divides ``log.cleaner.dedupe.buffer.size`` by ``log.cleaner.threads`` and gives each thread a fixed
map of that size; a round maps as many keys as fit and the next round goes on from there. Here the share
bounds the round's C table (slots and key bytes) and its superseded bitmap (one bit an offset of the round),
and the round stays whole and exact: beyond the share, the map spills (``cleaner/native/spill.c``).

1. Build: the dirty section's scan puts into the table while it fits. At the growth that would pass the
   share, the table's entries go to class files by key hash, the table is emptied, and every later put of
   the scan is appended to its class's file, sequentially.
2. Probe: if it spilled, the clean section (the records below the first dirty offset, which the filter
   asks about too) is read once and each keyed record's key and offset appended to its class's file.
3. Replay: one class at a time into the emptied table (each class a fraction of the keys), setting the
   superseded bit of every record a later offset of its key supersedes. The filter then reads the bitmap
   only: each dirty segment is read twice (build, filter) and the clean section twice (probe, filter).

The class files are in the partition's directory, or under ``log.cleaner.spill.dir`` (ours), made nameless
(``O_TMPFILE``), else under a ``.deleted`` name unlinked at once: a kill leaves nothing, or a ``.deleted``
file that Kafka's loader and logcleaner's delete at start (``remove_spill_leftovers`` for the spill dir).
A map that cannot spill exactly (a put from the Python rules, a range of offsets the bitmap cannot cover,
a spill file that fails) is built again without a bound, with a warning: the round still comes out whole.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from cleaner.native import NativeKeyMap, spill_key_map
from service.base.errors import InvalidInputError
from service.storage.log_files import DELETED_SUFFIX

__all__ = ["SPILL_FILE_MARK", "KeyMapBudget", "remove_spill_leftovers"]

logger = logging.getLogger(__name__)

SLOT_BYTES = 32  # native/key_map.h: a Slot
SPILL_OVERHEAD_BYTES = 10 << 20  # the class files' buffers (up to 256 x 32 KiB), the replay's read buffer
MIN_TABLE_BYTES = 64 << 10  # a floor for a share too small for anything but the bitmap
# in a spill file's fallback name (native/spill.c): <20 digits>.keymap-spill-<pid>-<class>.deleted
SPILL_FILE_MARK = ".keymap-spill-"


@dataclass(frozen=True, slots=True)
class KeyMapBudget:
    """One cleaner thread's share of ``log.cleaner.dedupe.buffer.size`` (``share_bytes``) and where its
    rounds spill beyond it (``spill_dir``; None: the partition's own directory)."""

    share_bytes: int
    spill_dir: Path | None = None

    @classmethod
    def of(cls, dedupe_buffer_bytes: int, threads: int, spill_dir: str | None = None) -> KeyMapBudget:
        """Kafka's share: the buffer divided by the threads; ``spill_dir`` (``log.cleaner.spill.dir``) must
        be a directory (``InvalidInputError``, at start-up, rather than a warning every round)."""
        directory = None
        if spill_dir:
            directory = Path(spill_dir).resolve()
            if not directory.is_dir():
                raise InvalidInputError(
                    f"log.cleaner.spill.dir={spill_dir!r} is not a directory: create it, or unset the key "
                    "to spill in each partition's own dir"
                )
        return cls(dedupe_buffer_bytes // max(threads, 1), directory)

    def table_bytes(self, first_offset: int, end: int) -> int:
        """What the table may take: the share less the bitmap over [first_offset, end) and the spill's own."""
        bitmap_bytes = max(end - first_offset, 0) // 8 + 8
        return max(self.share_bytes - bitmap_bytes - SPILL_OVERHEAD_BYTES, MIN_TABLE_BYTES)

    def may_pass(self, first_offset: int, start: int, end: int) -> bool:
        """Whether a round over [start, end) of a log from ``first_offset`` (its first segment's base) could
        pass the table's share: its dirty section's offsets, one key each (the Spark driver asks it too)."""
        return (end - start) * SLOT_BYTES * 8 // 3 > self.table_bytes(first_offset, end)  # fullest: 3/8 used

    def apply(self, key_map: NativeKeyMap, directory: Path, first_offset: int, start: int, end: int) -> bool:
        """Bound ``key_map`` for a round over [start, end) of a log from ``first_offset``: only when it
        ``may_pass`` the share (a smaller round keeps the unbounded map's speed). True if bounded."""
        if not self.may_pass(first_offset, start, end):
            return False
        spill_key_map(key_map, self.table_bytes(first_offset, end), self.spill_dir or directory, end)
        return True


def remove_spill_leftovers(spill_dir: Path) -> int:
    """Delete the spill files a killed process left in ``spill_dir`` (named only when ``O_TMPFILE`` is not
    available there); the number removed. A partition's own directory needs none of this: its loader
    deletes every ``.deleted`` file."""
    removed = 0
    try:
        names = [p for p in spill_dir.iterdir() if _is_spill_file(p.name)]
    except FileNotFoundError:
        return 0
    for path in names:
        path.unlink(missing_ok=True)
        removed += 1
        logger.info("Deleted %s: a key map spill file of a round that did not finish", path)
    return removed


def _is_spill_file(name: str) -> bool:
    return SPILL_FILE_MARK in name and name.endswith(DELETED_SUFFIX)

"""Reading a metadata log on from where the last reading stopped, as a broker applies what was appended.

A broker appends metadata records to its last segment, rolls a new segment now and then, and writes a
snapshot (after which it deletes the segments the snapshot covers). :class:`MetadataLogTail` keeps what a
reading built (its ``MetadataImageBuilder``) and where it stopped: the files it read, each segment's
inode and size, and the byte position after the last whole batch of the last segment (before a torn
tail, which the broker still writing it completes). :meth:`MetadataLogTail.read_on` then replays only the
batches after that position and those of the segments rolled since, into the same builder.

It reads on only when the files it read are still there as it read them: the same snapshot (none, or the
same file), the same segments first, each with its inode, every segment but the last of its size and
modification time, and the last either so too or grown (a broker only appends: a file rewritten in place
changes its time, not its size). Anything else (a new snapshot, a segment replaced, truncated or
gone) gives None, and the caller reads the whole log again (``read_all``). The image is the same either
way: the records are the same, replayed in the same order.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from service.metadata.image import MetadataImage, MetadataImageBuilder
from service.metadata.log_reader import MetadataEntry, MetadataLogFiles, read_segment_from, read_snapshot

__all__ = ["MetadataLogTail"]


@dataclass(frozen=True, slots=True)
class _SegmentStamp:
    """A segment as the last reading found it: its inode, size and modification time."""

    inode: int
    size: int
    mtime_ns: int


class MetadataLogTail:
    """The builder of the last reading and where it stopped (see the module docstring). Not shared between
    threads: its owner (``MetadataSource``) reads with it from one thread at a time. After an error while
    reading on, the builder may hold part of the new records: the owner drops it and reads all again."""

    def __init__(self, files: MetadataLogFiles) -> None:
        self._files = files
        self._builder = MetadataImageBuilder(end_offset=files.snapshot_end_offset)
        self._stamps: tuple[_SegmentStamp, ...] = ()
        self._position = 0  # in the last segment: after its last whole batch read

    @classmethod
    def read_all(cls, files: MetadataLogFiles) -> tuple[MetadataLogTail, MetadataImage]:
        """Read the whole log (its snapshot, then its segments); the tail to read on from, and the image."""
        tail = cls(files)
        if files.snapshot is not None:
            for entry in read_snapshot(files.snapshot):
                tail._builder.replay(entry)
        tail._replay_segments(files, first=0, start=0)
        return tail, tail._builder.build()

    def read_on(self, files: MetadataLogFiles) -> MetadataImage | None:
        """The image with the records appended since the last reading (``files``: the log as it is now),
        or None when the files read before changed otherwise (the caller reads all again)."""
        old = self._files.segments
        if files.snapshot != self._files.snapshot or files.segments[: len(old)] != old:
            return None
        stamps = [_stamp_of(path) for path in old]
        for i, (stamp, before) in enumerate(zip(stamps, self._stamps, strict=True)):
            grown = i == len(old) - 1 and stamp is not None and stamp.size > before.size
            if stamp is None or stamp.inode != before.inode or not (grown or stamp == before):
                return None
        if not old:  # only a snapshot was read: every segment is new
            self._replay_segments(files, first=0, start=0)
        else:
            self._replay_segments(files, first=len(old) - 1, start=self._position)
        self._files = files
        return self._builder.build()

    def _replay_segments(self, files: MetadataLogFiles, *, first: int, start: int) -> None:
        """Replay ``files.segments[first:]``, the first from byte ``start``; note where the reading ended."""
        segments = files.segments
        stamps = list(self._stamps[:first])
        position = start
        for i in range(first, len(segments)):
            path = segments[i]
            stamp = _stamp_of(path)
            position = self._replay(
                read_segment_from(
                    path,
                    start if i == first else 0,
                    is_last=i == len(segments) - 1,
                    from_offset=files.snapshot_end_offset,
                )
            )
            stamps.append(stamp if stamp is not None else _SegmentStamp(-1, -1, -1))
        self._stamps = tuple(stamps)
        self._position = position if segments else 0

    def _replay(self, entries: Generator[MetadataEntry, None, int]) -> int:
        """Replay ``entries`` into the builder; the position the reading returned."""
        while True:
            try:
                entry = next(entries)
            except StopIteration as done:
                return int(done.value)
            self._builder.replay(entry)


def _stamp_of(path: Path) -> _SegmentStamp | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _SegmentStamp(stat.st_ino, stat.st_size, stat.st_mtime_ns)

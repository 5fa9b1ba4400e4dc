"""The summary's estimate of what cleaning a log now would free, from key sketches of its segments.

:class:`SegmentSketches` keeps a sketch (``service.core.key_sketch``) of each sealed segment read once, in
memory, keyed by the file and its size (a cleaned segment swapped in under the same name has another size).
The daemon's summary task fills it a bounded number of bytes per run (:meth:`SegmentSketches.fill`), oldest
logs' segments first; a log is estimated once every segment a round would read has its sketch, else its
bytes count as not estimated. Nothing is written into a partition dir.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from service.base.errors import LogCleanerError
from service.core.held_bytes import PartitionBytes
from service.core.key_sketch import SegmentSketch, estimate_freed_bytes, sketch_segment
from service.storage.log import PartitionLog
from service.storage.segment import LogSegment

__all__ = ["SegmentSketches", "round_segments"]

logger = logging.getLogger(__name__)

_SketchKey = LogSegment  # by identity: a cleaned segment swapped in under the same name is another object


def round_segments(log: PartitionLog, part: PartitionBytes) -> list[LogSegment]:
    """The sealed segments a round over ``part.cleanable`` reads: every one below its first uncleanable
    offset (the clean section too: a round rewrites it)."""
    candidate = part.cleanable
    if candidate is None:
        return []
    segments = log.snapshot.segments
    return [s for s in segments[:-1] if s.base_offset < candidate.first_uncleanable_offset]


class SegmentSketches:
    """Sketches of sealed segments. ``_lock`` guards ``_sketches`` (the summary task fills it while a
    request may read it); a segment is read outside the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sketches: dict[_SketchKey, SegmentSketch] = {}
        self._estimates: dict[tuple[_SketchKey, ...], int] = {}  # by the run of segments estimated

    def get(self, segment: LogSegment) -> SegmentSketch | None:
        with self._lock:
            return self._sketches.get(segment)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sketches)

    def fill(self, segments: Sequence[LogSegment], budget_bytes: int) -> int:
        """Sketch the segments without one, in order, until ``budget_bytes`` are read; returns the bytes
        read. A segment that cannot be read (deleted meanwhile, corrupt) is skipped and logged."""
        read = 0
        for segment in segments:
            if read >= budget_bytes:
                break
            if self.get(segment) is not None:
                continue
            try:
                sketch = sketch_segment(segment)
            except (OSError, LogCleanerError, ValueError) as exc:
                logger.debug("Cannot sketch the keys of %s: %s", segment.log_path, exc)
                continue
            read += sketch.size_bytes
            with self._lock:
                self._sketches[segment] = sketch
        return read

    def adopt(self, segment: LogSegment, sketch: SegmentSketch) -> None:
        """Take a sketch made elsewhere (logcleaner's sketch file) if it is of the segment as it is now."""
        if sketch.size_bytes == segment.size_bytes:
            with self._lock:
                self._sketches[segment] = sketch

    def keep_only(self, segments: Sequence[LogSegment]) -> None:
        """Forget the sketches of segments no longer in any log (deleted, or replaced by cleaning)."""
        live = set(segments)
        with self._lock:
            for key in [k for k in self._sketches if k not in live]:
                del self._sketches[key]
            for run in [r for r in self._estimates if not live.issuperset(r)]:
                del self._estimates[run]

    def estimate(self, segments: Sequence[LogSegment]) -> int | None:
        """The estimated bytes a round over ``segments`` frees; None until every one has its sketch. The
        estimate of a run of segments is kept: an unchanged log costs a lookup at the next refresh."""
        run = tuple(segments)
        with self._lock:
            known = self._estimates.get(run)
            sketches = [self._sketches.get(key) for key in run]
        if known is not None:
            return known
        if any(s is None for s in sketches):
            return None
        estimate = estimate_freed_bytes(s for s in sketches if s is not None)
        with self._lock:
            self._estimates[run] = estimate
        return estimate

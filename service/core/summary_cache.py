"""The daemon's whole-broker summary (``GET /v1/explain/summary``, ``logcleaner_bytes_held``), kept ready.

A request never computes it: the scheduled task ``logcleaner-explain-summary`` (every
:data:`SUMMARY_REFRESH_MS`) rebuilds the document from the live logs, so it follows segment rolls,
retention passes and cleaning rounds within that period. Its first run starts as soon as the scheduler does,
not after ``scheduler.initial.delay.ms``; a request before it has ended waits for it.
A partition that did not change keeps its figures for up to ``summary.MEMO_MAX_AGE_MS``, so what time
alone changes (a segment coming due for time retention, past its compaction lag) shows within a minute.
Each run also reads up to :data:`SKETCH_BYTES_PER_REFRESH` of sealed segments of compacted logs into key
sketches (``service.core.compaction_estimate``), the candidates' oldest first, from which the compaction
estimate comes; a log whose segments are not all sketched yet counts in ``compaction_unestimated_bytes``.
A run that sketched new segments writes each log dir's sketches to logcleaner's sketch file
(``service.core.sketch_file``), from which offline ``explain --summary`` estimates too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from pathlib import Path

from service.core.compaction_estimate import SegmentSketches, round_segments
from service.core.held_bytes import PartitionBytes
from service.core.key_sketch import SegmentSketch
from service.core.log_manager import LogManager
from service.core.sketch_file import sketch_entry_name, write_sketch_file
from service.core.summary import PartitionMemo, summary_document, summary_parts, unloaded_dir_parts
from service.storage.topic_partition import TopicPartition

__all__ = ["SKETCH_BYTES_PER_REFRESH", "SUMMARY_REFRESH_MS", "BrokerSummary"]

logger = logging.getLogger(__name__)

SUMMARY_REFRESH_MS = 10_000
SKETCH_BYTES_PER_REFRESH = 16 << 20  # about a second of one core per refresh at the sketch's read rate

JsonDoc = dict[str, object]


class BrokerSummary:
    """Owner of the latest summary document. ``_lock`` guards ``_document``; ``_refresh_lock`` lets one
    refresh run at a time (the task, or a request before its first run). ``uncleanable()``: the partitions
    the cleaner marked uncleanable now (empty without a cleaner)."""

    def __init__(
        self,
        manager: LogManager,
        *,
        cleaner_enabled: bool,
        uncleanable: Callable[[], Collection[TopicPartition]],
        sketch_bytes_per_refresh: int = SKETCH_BYTES_PER_REFRESH,
    ) -> None:
        self._manager = manager
        self._cleaner_enabled = cleaner_enabled
        self._uncleanable = uncleanable
        self._budget = sketch_bytes_per_refresh
        self._sketches = SegmentSketches()
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._document: JsonDoc | None = None
        self._memo: dict[TopicPartition, PartitionMemo] = {}  # guarded by _refresh_lock

    def document(self) -> JsonDoc:
        """The latest document; before the first refresh has ended, the one it builds (waited for), or
        one built now, reading no record, if none is running."""
        with self._lock:
            document = self._document
        if document is not None:
            return document
        with self._refresh_lock, self._lock:  # the first refresh, if in flight, ends before this is taken
            document = self._document
        return document if document is not None else self.refresh(sketch=False)

    def latest(self) -> JsonDoc | None:
        """The latest document, or None before the first refresh (a scrape never builds one)."""
        with self._lock:
            return self._document

    def refresh(self, *, sketch: bool = True) -> JsonDoc:
        """Rebuild the document from the live logs; the scheduled task's body. ``sketch=False``: read no
        record (estimate from the sketches made so far)."""
        with self._refresh_lock:
            manager = self._manager
            parts = summary_parts(
                manager,
                cleaner_enabled=self._cleaner_enabled,
                uncleanable=frozenset(self._uncleanable()),
                on_unreadable=_warn_unreadable_checkpoint,
                memo=self._memo,
            )
            parts += unloaded_dir_parts(manager.log_dirs, skip=set(manager.offline_dirs))
            self._estimate(parts, self._budget if sketch else 0)
            document = summary_document(parts, generated_at_ms=manager.clock.now_ms())
            with self._lock:
                self._document = document
            return document

    def _estimate(self, parts: list[PartitionBytes], budget: int) -> None:
        """Sketch what the budget allows (the candidates in order), then estimate every fully sketched one."""
        logs = self._manager.logs
        rounds = []
        for part in parts:
            if part.cleanable is None or part.topic is None or part.partition is None:
                continue
            log = logs.get(TopicPartition(part.topic, part.partition))
            if log is not None:
                rounds.append((part, round_segments(log, part)))
        self._sketches.keep_only([s for log in logs.values() for s in log.snapshot.segments])
        read = 0
        for _part, segments in rounds:
            if read >= budget:
                break
            read += self._sketches.fill(segments, budget - read)
        for part, segments in rounds:
            part.compaction_freed_bytes = self._sketches.estimate(segments)
        if read:
            self._save_sketches()

    def _save_sketches(self) -> None:
        """Each log dir's sketches into its sketch file, for offline ``explain --summary`` (a failure is
        logged: the file is an optimisation)."""
        by_dir: dict[Path, dict[str, SegmentSketch]] = {}
        for log in self._manager.logs.values():
            entries = by_dir.setdefault(log.log_dir, {})
            for segment in log.snapshot.segments[:-1]:
                sketch = self._sketches.get(segment)
                if sketch is not None:
                    entries[sketch_entry_name(log.directory.name, segment.base_offset)] = sketch
        for log_dir, entries in by_dir.items():
            try:
                write_sketch_file(log_dir, entries)
            except OSError as exc:
                logger.warning("Cannot write the key sketches of %s: %s", log_dir, exc)


def _warn_unreadable_checkpoint(path: object, exc: Exception) -> None:
    logger.warning("cleaner-offset-checkpoint of %s cannot be read: %s", path, exc)

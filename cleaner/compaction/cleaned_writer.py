"""A cleaned group's ``<base>.log.cleaned`` segment as ``clean_group`` writes it (Kafka's ``cleanInto``
target): created at the first change, fed batch by batch (the Python rules) or a run at a time
(``filter_batches``), finished with its final time-index entry, trimmed indexes and the source's mtime,
fsynced or left for the caller's ``group_swap.sync_and_swap``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cleaner.compaction.rules import BatchOutcome
from cleaner.native import Writeback
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    segment_path,
)
from service.storage.records import RecordBatch
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn

__all__ = ["BATCH_UNCHANGED", "META_FIELDS", "CleanedWriter", "delete_cleaned_files"]

META_FIELDS = 10  # per batch of filter_batches: see cleaner/native/filter_batches.c
BATCH_UNCHANGED = 1  # a row's outcome: the batch comes out as it went in


class CleanedWriter:
    """The group's ``.cleaned`` segment, created at the first change.

    Multi-segment groups always change (they merge). For a one-segment group, leading batches that come out
    unchanged are only counted (``_unchanged_end``); the first changed or dropped batch creates the file and
    copies them from the source first. If the file was never needed, ``finish`` returns None unless the
    ``.txnindex`` would differ.
    """

    def __init__(
        self, segments: Sequence[LogSegment], directory: Path, config: LogConfig, now_ms: int
    ) -> None:
        self._source = segments[0] if len(segments) == 1 else None
        self._base = segments[0].base_offset
        self._directory = directory
        self._config = config
        self._now_ms = now_ms
        self._unchanged_end = 0
        self._cleaned: LogSegment | None = None
        self._writeback: Writeback | None = None
        if self._source is None:
            self._open()

    def add(self, batch: RecordBatch, outcome: BatchOutcome) -> None:
        self.add_raw(
            batch.position + batch.size_bytes,
            outcome.data,
            outcome.is_unchanged,
            batch.last_offset,
            outcome.max_timestamp,
        )

    def add_raw(
        self, end_position: int, data: bytes | None, is_unchanged: bool, last_offset: int, max_timestamp: int
    ) -> None:
        """One source batch's outcome: the file position after it, its bytes to write (None: gone)."""
        if self._cleaned is None and is_unchanged:
            self._unchanged_end = end_position
            return
        cleaned = self._cleaned or self._open()
        if data is not None:
            _append(cleaned, data, last_offset, max_timestamp)

    def add_run(self, buffer_start: int, out: bytes | memoryview, rows: memoryview) -> None:
        """The outcomes of a run of batches from ``filter_batches`` (``rows``: its metadata as int64, a
        buffer's worth read from file position ``buffer_start``; ``out``: the bytes of every batch it kept,
        end to end): once the cleaned file exists, one write."""
        first = 0
        if self._cleaned is None:
            outcomes = rows[0::META_FIELDS]
            while first < len(outcomes) and outcomes[first] == BATCH_UNCHANGED:
                first += 1
            if first:
                at = (first - 1) * META_FIELDS
                self._unchanged_end = buffer_start + rows[at + 1] + rows[at + 2]
            if first == len(outcomes):
                return
        cleaned = self._cleaned or self._open()
        rest = rows[first * META_FIELDS :]
        cleaned.append_batches(
            memoryview(out)[rest[3] :],
            rest[4::META_FIELDS],
            rest[5::META_FIELDS],
            rest[6::META_FIELDS],
        )
        if self._writeback is not None:
            self._writeback.written(cleaned.size_bytes)

    def finish(self, retained: list[AbortedTxn], mtime_ms: int, *, fsync: bool) -> LogSegment | None:
        cleaned = self._cleaned
        if cleaned is None:  # a one-segment group whose batches all came out unchanged
            source = self._source
            if source is not None and retained == source.txn_index.all_aborted():
                return None
            cleaned = self._open()
        self._stop_writeback()
        for txn in retained:
            cleaned.append_aborted_txn(txn)
        cleaned.on_become_inactive()
        if fsync:
            cleaned.flush()
        cleaned.close_file()
        cleaned.set_last_modified_ms(mtime_ms)
        return cleaned

    def discard(self) -> None:
        self._stop_writeback()
        if self._cleaned is not None:
            self._cleaned.delete_files()
            self._cleaned = None

    def _stop_writeback(self) -> None:
        if self._writeback is not None:
            self._writeback.close()
            self._writeback = None

    def _open(self) -> LogSegment:
        delete_cleaned_files(self._directory, self._base)
        cleaned = LogSegment.create(
            self._directory,
            self._base,
            config=self._config,
            now_ms=self._now_ms,
            suffix=CLEANED_SUFFIX,
            indexes_grow=True,
        )
        self._cleaned = cleaned
        self._writeback = Writeback.open(cleaned.log_path)
        if self._source is not None and self._unchanged_end:
            for batch in self._source.batches():
                if batch.position >= self._unchanged_end:
                    break
                _append(cleaned, batch.data, batch.last_offset, batch.max_timestamp)
        return cleaned


def delete_cleaned_files(directory: Path, base_offset: int) -> None:
    """The ``.cleaned`` segment files of ``base_offset`` (a cleaning's output, never a live segment's)."""
    for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
        segment_path(directory, base_offset, suffix + CLEANED_SUFFIX).unlink(missing_ok=True)


def _append(segment: LogSegment, data: bytes, last_offset: int, max_timestamp: int) -> None:
    """One surviving batch, one append: its indexes follow the normal ``index.interval.bytes`` rule."""
    segment.append(
        data, largest_offset=last_offset, max_timestamp=max_timestamp, offset_of_max_timestamp=last_offset
    )

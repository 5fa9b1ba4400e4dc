"""``CleanedWriter``: a group's ``.cleaned`` segment, created only at the first change. A one-segment group
whose batches all come out unchanged writes no file (unless its ``.txnindex`` would differ); leading
unchanged batches are copied once a later batch changes; a multi-segment group always writes; a crash's
stale ``.cleaned`` files are replaced; ``finish`` appends the retained aborted transactions and sets the
source's mtime; ``discard`` leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

from cleaner.compaction.cleaned_writer import CleanedWriter, delete_cleaned_files
from service.base.clock import ManualClock
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANED_SUFFIX
from service.storage.records import RecordBatch
from service.storage.txn_index import AbortedTxn
from tests.cleaner.helpers import keyed, new_log

MTIME_MS = 1_500_000_000_000


def cleaned_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(CLEANED_SUFFIX))


def sealed_log(log_dir: Path, clock: ManualClock) -> PartitionLog:
    """Three sealed segments of single-record batches, and an active one."""
    log = new_log(log_dir, clock)
    while len(log.segments) < 4:
        log.append_records([keyed(log.log_end_offset)])
    return log


def feed(writer: CleanedWriter, batches: list[RecordBatch], *, dropped: frozenset[int] = frozenset()) -> None:
    """Each batch unchanged, but those whose base offset is in ``dropped`` (gone)."""
    for batch in batches:
        gone = batch.base_offset in dropped
        writer.add_raw(
            batch.position + batch.size_bytes,
            None if gone else batch.data,
            not gone,
            batch.last_offset,
            batch.max_timestamp,
        )


def test_an_unchanged_single_segment_writes_no_file(log_dir: Path, clock: ManualClock) -> None:
    log = sealed_log(log_dir, clock)
    segment = log.segments[0]
    writer = CleanedWriter([segment], log_dir, log.config, clock.now_ms())
    feed(writer, list(segment.batches()))
    assert writer.finish([], MTIME_MS, fsync=False) is None
    assert cleaned_names(log_dir) == []


def test_an_unchanged_segment_whose_txn_index_differs_is_rewritten(log_dir: Path, clock: ManualClock) -> None:
    log = sealed_log(log_dir, clock)
    segment = log.segments[0]
    batches = list(segment.batches())
    writer = CleanedWriter([segment], log_dir, log.config, clock.now_ms())
    feed(writer, batches)
    txn = AbortedTxn(7, 0, 1, 2)
    cleaned = writer.finish([txn], MTIME_MS, fsync=True)
    assert cleaned is not None
    assert [b.data for b in cleaned.batches()] == [b.data for b in batches], "the unchanged batches copied"
    assert cleaned.txn_index.all_aborted() == [txn]
    assert os.stat(cleaned.log_path).st_mtime_ns // 1_000_000 == MTIME_MS


def test_leading_unchanged_batches_are_copied_when_a_later_one_changes(
    log_dir: Path, clock: ManualClock
) -> None:
    log = sealed_log(log_dir, clock)
    segment = log.segments[0]
    batches = list(segment.batches())
    assert len(batches) >= 3
    writer = CleanedWriter([segment], log_dir, log.config, clock.now_ms())
    feed(writer, batches, dropped=frozenset({batches[1].base_offset}))
    cleaned = writer.finish([], MTIME_MS, fsync=False)
    assert cleaned is not None and cleaned.base_offset == segment.base_offset
    assert cleaned.log_path.name.endswith(".log" + CLEANED_SUFFIX)
    kept = [b.base_offset for b in cleaned.batches()]
    assert kept == [b.base_offset for b in batches if b is not batches[1]]


def test_a_multi_segment_group_always_writes(log_dir: Path, clock: ManualClock) -> None:
    log = sealed_log(log_dir, clock)
    group = log.segments[:2]
    writer = CleanedWriter(group, log_dir, log.config, clock.now_ms())
    assert cleaned_names(log_dir) != [], "created at once: a merge is a change"
    for segment in group:
        feed(writer, list(segment.batches()))
    cleaned = writer.finish([], MTIME_MS, fsync=False)
    assert cleaned is not None
    assert [b.base_offset for b in cleaned.batches()] == [b.base_offset for s in group for b in s.batches()]


def test_stale_cleaned_files_are_replaced_and_discard_leaves_nothing(
    log_dir: Path, clock: ManualClock
) -> None:
    """A crashed round's ``.cleaned`` files are never a live segment's: a new group's file starts empty."""
    log = sealed_log(log_dir, clock)
    base = log.segments[0].base_offset
    for suffix in (".log", ".index"):
        (log_dir / f"{base:020d}{suffix}{CLEANED_SUFFIX}").write_bytes(b"garbage from a crashed round")
    writer = CleanedWriter(log.segments[:2], log_dir, log.config, clock.now_ms())
    assert (log_dir / f"{base:020d}.log{CLEANED_SUFFIX}").stat().st_size == 0, "a fresh file"
    writer.discard()
    assert cleaned_names(log_dir) == []
    delete_cleaned_files(log_dir, base)  # nothing there: no error

"""A Spark task's cleaned segments are made durable on a thread of the task's own (``CleanedSyncs``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cleaner.spark.rewrite import CleanedSyncs
from service.storage.log_config import LogConfig
from service.storage.log_files import CLEANED_SUFFIX
from service.storage.records import Record, encode_batch
from service.storage.segment import LogSegment

NOW_MS = 1_700_000_000_000


def written_segment(directory: Path, base: int) -> LogSegment:
    """A ``.cleaned`` segment as ``clean_group(fsync=False)`` leaves it: written, its descriptor closed,
    nothing fsynced yet."""
    segment = LogSegment.create(directory, base, config=LogConfig(), now_ms=NOW_MS, suffix=CLEANED_SUFFIX)
    data = encode_batch([Record(0, NOW_MS, b"k", b"v")], base_offset=base)
    segment.append(data, largest_offset=base, max_timestamp=NOW_MS, offset_of_max_timestamp=base)
    segment.close_file()
    return segment


def sync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "logcleaner-cleaned-fsync"]


def test_every_segment_handed_over_is_flushed_and_released_before_the_with_ends(tmp_path: Path) -> None:
    segments = [written_segment(tmp_path, base) for base in (0, 10, 20)]
    assert all(s.awaits_flush for s in segments)
    with CleanedSyncs() as syncs:
        for segment in segments:
            syncs.hand_over(segment)
    assert not any(s.awaits_flush for s in segments)
    assert not sync_threads()


def test_a_failed_fsync_fails_the_task_and_the_later_segments_are_still_released(tmp_path: Path) -> None:
    gone, after = written_segment(tmp_path, 0), written_segment(tmp_path, 10)
    gone.log_path.unlink()  # its fsync (through a new descriptor, by name) fails
    with pytest.raises(FileNotFoundError), CleanedSyncs() as syncs:
        syncs.hand_over(gone)
        syncs.hand_over(after)
    assert after.awaits_flush, "after a failure the task fails: no more fsyncs"
    assert not sync_threads()


def test_a_failing_task_waits_for_the_syncs_and_keeps_its_own_error(tmp_path: Path) -> None:
    segment = written_segment(tmp_path, 0)
    segment.log_path.unlink()
    with pytest.raises(KeyError), CleanedSyncs() as syncs:
        syncs.hand_over(segment)
        raise KeyError("the task's own failure")
    assert not sync_threads()

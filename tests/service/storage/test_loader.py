"""Loading and recovery (much as Kafka's ``LogLoaderTest`` checks them): truncated tails, corrupt segments,
missing indexes, leftover ``.cleaned``/``.swap``/``.deleted`` files."""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from service.storage.loader import LoadResult
from service.storage.log_config import LogConfig
from service.storage.records import Record, encode_batch
from service.storage.segment import LogSegment
from tests.service.storage.conftest import MakeLog, OpenLog, keyed

SEGMENT_BYTES = 300


def fill(make_log: MakeLog, count: int = 40) -> list[Record]:
    """A log of ``count`` keyed records across several 300-byte segments, closed cleanly."""
    log = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1)
    for i in range(count):
        log.append_records([keyed(b"k%d" % i, b"v%d" % i, timestamp=1000 + i)])
    records = log.read(0, max_records=count)
    log.close()
    return records


def reopen(open_log: OpenLog, **kwargs: object) -> tuple[list[Record], LoadResult]:
    result = open_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1, **kwargs)
    return result.log.read(0, max_records=10_000), result


def seg(log_dir: Path, base: int, suffix: str) -> Path:
    return log_dir / f"{base:020d}{suffix}"


def test_truncated_tail_is_cut_at_the_last_whole_batch(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path
) -> None:
    records = fill(make_log)
    last_log = sorted(log_dir.glob("*.log"))[-1]
    size = last_log.stat().st_size
    os.truncate(last_log, size - 5)
    recovered, result = reopen(open_log)
    assert recovered == records[:-1]
    assert result.truncated_bytes > 0
    assert result.log.log_end_offset == len(records) - 1


def test_garbage_appended_to_log_and_index_is_dropped(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path
) -> None:
    """Random bytes after the last batch (and in the index) vanish; every record survives."""
    records = fill(make_log)
    last_log = sorted(log_dir.glob("*.log"))[-1]
    with open(last_log, "ab") as f:
        f.write(os.urandom(37))
    with open(last_log.with_suffix(".index"), "ab") as f:
        f.write(os.urandom(8))
    recovered, result = reopen(open_log, recovery_point=0)
    assert recovered == records
    assert result.log.log_end_offset == len(records)


def test_flipped_byte_in_a_middle_segment_truncates_there(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path
) -> None:
    records = fill(make_log)
    logs = sorted(log_dir.glob("*.log"))
    middle = logs[len(logs) // 2]
    data = bytearray(middle.read_bytes())
    data[len(data) // 2] ^= 0xFF
    middle.write_bytes(bytes(data))
    recovered, result = reopen(open_log)
    kept = result.log.log_end_offset
    assert recovered == records[:kept]
    assert int(middle.name[:20]) <= kept < len(records)
    assert sorted(log_dir.glob("*.log"))[-1] == middle, "every later segment is gone"


def test_missing_and_corrupt_indexes_are_rebuilt(make_log: MakeLog, open_log: OpenLog, log_dir: Path) -> None:
    """Indexes deleted or overwritten with 2 bytes are rebuilt, even after a clean shutdown."""
    records = fill(make_log)
    indexes = sorted(log_dir.glob("*.index"))
    expected_entries = [os.path.getsize(p) for p in indexes]
    indexes[0].unlink()
    indexes[1].write_bytes(b"\x00\x01")
    recovered, result = reopen(open_log, clean_shutdown=True)
    assert recovered == records
    log = result.log
    assert [s.offset_index.entries * 8 for s in log.segments[:2]] == expected_entries[:2]
    for record in records:
        assert log.read(record.offset, 1) == [record]


def test_bogus_index_files_without_a_log_are_deleted(open_log: OpenLog, log_dir: Path) -> None:
    """Index files with no ``.log`` of their own are deleted on load."""
    seg(log_dir, 5, ".index").write_bytes(b"")
    seg(log_dir, 5, ".timeindex").write_bytes(b"")
    log = open_log().log
    assert not seg(log_dir, 5, ".index").exists()
    assert not seg(log_dir, 5, ".timeindex").exists()
    assert [s.base_offset for s in log.segments] == [0]


def test_leftover_cleaned_and_deleted_files_are_removed(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path
) -> None:
    """A crash before the swap (``.cleaned`` and ``.deleted`` files left) leaves the original data."""
    records = fill(make_log)
    first = seg(log_dir, 0, ".log")
    shutil.copy(first, str(first) + ".cleaned")
    shutil.copy(first, str(seg(log_dir, 0, ".index")) + ".deleted")
    recovered, _ = reopen(open_log)
    assert recovered == records
    assert not list(log_dir.glob("*.cleaned")) and not list(log_dir.glob("*.deleted"))


def test_swap_file_completes_the_replacement(make_log: MakeLog, open_log: OpenLog, log_dir: Path) -> None:
    """A ``.swap`` left by a crash mid-swap replaces the segments in its range."""
    records = fill(make_log)
    bases = sorted(int(p.name[:20]) for p in log_dir.glob("*.log"))
    # The "cleaned" replacement of the first two segments: their records with odd offsets dropped.
    kept = [r for r in records if r.offset < bases[2] and r.offset % 2 == 0]
    swap = b"".join(encode_batch([r]) for r in kept)
    seg(log_dir, 0, ".log.swap").write_bytes(swap)
    recovered, _ = reopen(open_log)
    assert recovered == kept + [r for r in records if r.offset >= bases[2]]
    assert not list(log_dir.glob("*.swap"))
    assert not seg(log_dir, bases[1], ".log").exists(), "the replaced segment was deleted"


def test_swap_at_or_above_a_cleaned_file_is_an_interrupted_split(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path
) -> None:
    records = fill(make_log)
    shutil.copy(seg(log_dir, 0, ".log"), str(seg(log_dir, 0, ".log")) + ".cleaned")
    shutil.copy(seg(log_dir, 0, ".log"), str(seg(log_dir, 0, ".log")) + ".swap")
    recovered, _ = reopen(open_log)
    assert recovered == records
    assert not list(log_dir.glob("*.swap"))


def test_log_end_below_log_start_starts_afresh(make_log: MakeLog, open_log: OpenLog, log_dir: Path) -> None:
    """A checkpointed start offset past every surviving record leaves one empty segment there."""
    fill(make_log, count=10)
    result = open_log(segment_bytes=SEGMENT_BYTES, log_start_offset=50, clean_shutdown=True)
    log = result.log
    assert [s.base_offset for s in log.segments] == [50]
    assert log.log_start_offset == log.log_end_offset == 50
    assert seg(log_dir, 50, ".log").exists()


def test_clean_shutdown_skips_recovery(make_log: MakeLog, open_log: OpenLog) -> None:
    """After a clean shutdown no segment is recovered; the recovery point is the log end."""
    records = fill(make_log)
    recovered, result = reopen(open_log, clean_shutdown=True, recovery_point=0)
    assert recovered == records
    assert result.recovered_segments == 0
    assert result.log.recovery_point == len(records)


_RECORDED_OPENS: list[list[str]] = []


def _record_open(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _RECORDED_OPENS and isinstance(args[0], (str, bytes, os.PathLike)):
        _RECORDED_OPENS[-1].append(os.fsdecode(args[0]))


sys.addaudithook(_record_open)  # process-wide and permanent: it records only while a list is pushed


def test_clean_load_reads_only_the_active_segment_and_an_idle_close_reads_only_its_snapshot(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path
) -> None:
    """After a clean shutdown a load opens only the active segment's files (partition.metadata, the
    leader-epoch checkpoint and the producer snapshot wait for their first use), and the close of a log
    nothing used opens only its producer snapshot, read as Kafka reads it at load (a corrupt one is
    replaced)."""
    fill(make_log, count=37)
    active_base = max(int(p.stem) for p in log_dir.glob("*.log"))
    _RECORDED_OPENS.append([])
    try:
        log = open_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1, clean_shutdown=True).log
        loading = _RECORDED_OPENS[-1]
        closing: list[str] = []
        _RECORDED_OPENS[-1] = closing
        log.close()
    finally:
        _RECORDED_OPENS.pop()
    assert sorted(Path(p).name for p in loading) == sorted(
        seg(log_dir, active_base, suffix).name for suffix in (".index", ".timeindex", ".log")
    )
    assert [Path(p).name for p in closing] == [f"{37:020d}.snapshot"]


@pytest.mark.parametrize("recovery_point", ["in the third segment", "at the log end"])
def test_an_unclean_load_opens_each_file_once(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path, recovery_point: str
) -> None:
    """After an unclean shutdown the segments from the one holding the recovery point are read by their
    recovery alone: their indexes are not checked first (recovery rebuilds them whatever they hold, as
    Kafka's ``LogSegment.sanityCheck`` reasons), and the active segment is not read again for the log end
    offset its recovery found. The segments below are checked, their logs not read. ``partition.metadata``,
    the leader-epoch checkpoint and, when it is at the recovery point, the producer snapshot at the log end
    wait for their first use, as after a clean shutdown."""
    records = fill(make_log)
    log_end = len(records)
    bases = sorted(int(p.stem) for p in log_dir.glob("*.log"))
    first = 2 if recovery_point == "in the third segment" else len(bases) - 1
    _RECORDED_OPENS.append([])
    try:
        result = open_log(
            segment_bytes=SEGMENT_BYTES,
            index_interval_bytes=1,
            recovery_point=bases[first] + 1 if first == 2 else log_end,
        )
    finally:
        opened = Counter(Path(p).name for p in _RECORDED_OPENS.pop())
    assert max(opened.values()) == 1
    assert [int(name[:-4]) for name in sorted(opened) if name.endswith(".log")] == bases[first:]
    others = sorted(name for name in opened if not name[:1].isdigit() or name.endswith(".snapshot"))
    assert others == ([f"{log_end:020d}.snapshot"] if first == 2 else []), "the snapshot: for the replay"
    log = result.log
    assert result.recovered_segments == len(bases) - first
    assert log.log_end_offset == log_end
    assert log.read(0, max_records=10_000) == records
    assert log.leader_epochs.entries != []
    log.close()


def test_releasing_a_sealed_segment_that_appended_nothing_reads_none_of_its_files(
    make_log: MakeLog, log_dir: Path
) -> None:
    """``release`` after a swap (the cleaner's driver builds the object over a task's finished files): its
    time index already ends with the largest timestamp, so nothing is read back to append it again."""
    fill(make_log)
    files = {p.name: p.read_bytes() for p in log_dir.glob("00000000000000000000.*")}
    config = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1)
    segment = LogSegment(log_dir, 0, config=config, created_ms=0)
    _RECORDED_OPENS.append([])
    try:
        segment.release()
        opened = _RECORDED_OPENS[-1]
    finally:
        _RECORDED_OPENS.pop()
    assert opened == []
    assert {p.name: p.read_bytes() for p in log_dir.glob("00000000000000000000.*")} == files
    assert segment.max_timestamp_so_far >= 1000, "read now, from the time index's last entry"


def test_clean_load_and_close_of_an_idle_log_write_no_index(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path
) -> None:
    """The active segment's indexes stay as the clean close left them through a load and a close (Kafka's
    lazy indexes: nothing to trim or fsync at 100,000 idle logs); the first append preallocates them."""
    records = fill(make_log, count=37)  # the active segment holds one record: room for more
    active_base = max(int(p.stem) for p in log_dir.glob("*.log"))
    indexes = [seg(log_dir, active_base, suffix) for suffix in (".index", ".timeindex")]
    before = [(p.stat().st_size, p.stat().st_mtime_ns) for p in indexes]
    result = open_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1, clean_shutdown=True)
    assert [(p.stat().st_size, p.stat().st_mtime_ns) for p in indexes] == before
    result.log.close()
    assert [(p.stat().st_size, p.stat().st_mtime_ns) for p in indexes] == before
    log = open_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1, clean_shutdown=True).log
    segments = len(log.segments)
    log.append_records([keyed(b"k", b"v", timestamp=5000)])
    assert len(log.segments) == segments, "the trimmed index must not roll the segment"
    assert indexes[0].stat().st_size > before[0][0]  # preallocated again
    assert log.read(0, max_records=1000)[-1].offset == len(records)

"""A read that meets retention: the segment it is reading stays readable from its open descriptor after
its files are deleted, and a segment deleted after the read listed it (before it opened it) is passed, as
Kafka's fetch goes on from the segment's open channel; never a ``FileNotFoundError``."""

from __future__ import annotations

from pathlib import Path

from tests.service.storage.conftest import MakeLog, keyed

RECORDS = 40


def test_a_read_goes_on_from_its_open_segment_after_retention_deleted_its_files(
    make_log: MakeLog, log_dir: Path
) -> None:
    log = make_log(segment_bytes=600)
    for i in range(RECORDS):
        log.append_records([keyed(b"k%d" % i, b"v%d" % i)])
    segments = log.segments
    assert len(segments) >= 4
    first_end, third_base = segments[1].base_offset, segments[2].base_offset
    reader = log.read_batches(0)
    read = [next(reader)]  # the first segment is open; the second is listed, not opened

    doomed = log.delete_oldest_segments(2)  # retention with file.delete.delay.ms=0: renamed, then gone
    for segment in doomed:
        segment.delete_files()
    assert not list(log_dir.glob("*.log.deleted")) and not list(log_dir.glob("*index.deleted"))
    assert log.log_start_offset == third_base

    read += list(reader)
    offsets = [batch.base_offset for batch in read]
    assert offsets == sorted(set(offsets))
    assert offsets[:first_end] == list(range(first_end)), "the open segment is read to its end"
    assert offsets[first_end:] == list(range(third_base, RECORDS)), "the deleted one is passed"
    assert [r.value for b in read[first_end:] for r in b.records()] == [
        b"v%d" % i for i in range(third_base, RECORDS)
    ]

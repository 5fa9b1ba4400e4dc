"""``SegmentChunks``: a segment's ``.log`` read in large chunks for the C loops: the batch at ``position``
is whole in the buffer ``chunk()`` gives whenever it fits before the end (a batch larger than a chunk gets
a larger buffer), ``batch_here`` decodes it as ``segment.batches`` does and locates corruption in the file,
``of_range`` keeps to its bounds, and the thread's buffer is reused by its next ``SegmentChunks``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cleaner.compaction.segment_chunks import SegmentChunks
from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.storage.file_records import CHUNK_BYTES
from service.storage.log import PartitionLog
from service.storage.records import LOG_OVERHEAD, RecordBatch, peek_batch_size
from tests.cleaner.helpers import flip_byte, keyed, new_log


def walk(chunks: SegmentChunks) -> list[RecordBatch]:
    """Every batch to the end, checking that each ``chunk()`` holds the batch at ``position`` whole."""
    batches = []
    while chunks.has_more:
        buf, at = chunks.chunk()
        assert chunks.buffer_start + at == chunks.position
        assert peek_batch_size(buf, at) <= len(buf) - at, "the batch at position is whole in the chunk"
        batch = chunks.batch_here()
        batches.append(batch)
        chunks.position += batch.size_bytes
    return batches


@pytest.fixture
def log(log_dir: Path, clock: ManualClock) -> PartitionLog:
    """Two sealed segments of single-record batches and an active one."""
    log = new_log(log_dir, clock, segment_bytes=1024)
    for i in range(35):
        log.append_records([keyed(i)])
    assert len(log.segments) >= 3
    return log


def test_a_walk_gives_the_segments_batches(log: PartitionLog) -> None:
    segment = log.segments[0]
    with SegmentChunks(segment, 0) as chunks:
        walked = walk(chunks)
    expected = list(segment.batches(verify_crc=True))
    assert [(b.base_offset, b.position, b.data) for b in walked] == [
        (b.base_offset, b.position, b.data) for b in expected
    ]


def test_small_batches_are_served_from_one_read(log: PartitionLog) -> None:
    segment = log.segments[0]
    with SegmentChunks(segment, 0) as chunks:
        buf, _ = chunks.chunk()
        assert len(buf) == segment.size_bytes, "the whole segment fits a chunk"
        while chunks.has_more:
            again, at = chunks.chunk()
            assert again is buf and chunks.buffer_start == 0
            chunks.position += peek_batch_size(again, at)


def test_a_walk_may_start_at_any_batch(log: PartitionLog) -> None:
    segment = log.segments[1]
    positions = [b.position for b in segment.batches()]
    with SegmentChunks(segment, positions[3]) as chunks:
        walked = walk(chunks)
    assert [b.position for b in walked] == positions[3:]


def test_of_range_keeps_to_its_bounds(log: PartitionLog) -> None:
    segment = log.segments[0]
    batches = list(segment.batches())
    start, end = batches[2].position, batches[5].position
    with SegmentChunks.of_range(str(segment.log_path), start, end) as chunks:
        buf, at = chunks.chunk()
        assert len(buf) - at == end - start, "nothing read past the range's end"
        walked = walk(chunks)
    assert [b.base_offset for b in walked] == [b.base_offset for b in batches[2:5]]


def test_a_batch_larger_than_a_chunk_gets_a_buffer_of_its_size(log_dir: Path, clock: ManualClock) -> None:
    big = 1 + CHUNK_BYTES
    log = new_log(log_dir, clock, segment_bytes=3 * big, max_message_bytes=2 * big)
    log.append_records([keyed(1)])
    log.append_records([keyed(b"2", b"x" * big)])
    log.append_records([keyed(3)])
    segment = log.segments[0]
    with SegmentChunks(segment, 0) as chunks:
        walked = walk(chunks)
    assert [b.base_offset for b in walked] == [0, 1, 2]
    assert walked[1].size_bytes > CHUNK_BYTES
    assert walked[1].records()[0].value == b"x" * big


def test_a_corrupt_batch_is_located_in_the_file(log: PartitionLog) -> None:
    segment = log.segments[0]
    third = list(segment.batches())[2]
    flip_byte(segment.log_path, third.position + third.size_bytes - 1)
    with SegmentChunks(segment, 0) as chunks:
        with pytest.raises(CorruptDataError, match="CRC") as info:
            walk(chunks)
        assert chunks.position == third.position
    assert (info.value.path, info.value.position) == (str(segment.log_path), third.position)


def test_a_batch_cut_by_the_range_end_is_corrupt(log: PartitionLog) -> None:
    """A batch that does not fit before ``end`` (a torn tail) is not read past the end: it is reported
    as corrupt at its position."""
    segment = log.segments[0]
    second = list(segment.batches())[1]
    with SegmentChunks.of_range(str(segment.log_path), 0, second.position + LOG_OVERHEAD + 3) as chunks:
        chunks.position = second.position
        chunks.chunk()
        with pytest.raises(CorruptDataError) as info:
            chunks.batch_here()
    assert (info.value.path, info.value.position) == (str(segment.log_path), second.position)


def test_the_threads_buffer_is_reused_by_its_next_reader(log: PartitionLog) -> None:
    first, second = log.segments[0], log.segments[1]
    with SegmentChunks(first, 0) as chunks:
        buf, _ = chunks.chunk()
        space = buf.obj
        assert isinstance(space, bytearray)
        output = chunks.output_space()
        assert len(output) >= 2 * len(space) + (64 << 10)
        assert chunks.output_space() is output, "the output buffer is reused from call to call"
    with pytest.raises(ValueError):
        buf[0]  # released with its SegmentChunks: no view outlives the buffer's reuse
    with SegmentChunks(second, 0) as chunks:
        assert chunks.chunk()[0].obj is space
        assert chunks.output_space() is output

    other: list[object] = []

    def read_in_another_thread() -> None:
        with SegmentChunks(first, 0) as chunks:
            other.append(chunks.chunk()[0].obj)

    thread = threading.Thread(target=read_in_another_thread)
    thread.start()
    thread.join()
    assert other and other[0] is not space, "each thread has its own"

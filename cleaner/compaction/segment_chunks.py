"""A sealed segment's ``.log`` read in large chunks for the C loops of ``cleaner._native``.

The C loops (``KeyMap.map_batches``, ``filter_batches``) take a run of whole batches out of a chunk and stop
at the first batch they leave to Python; ``batch_here`` decodes that one exactly as ``iter_file_batches``
would (CRC checked; a corrupt or legacy batch raises its ``CorruptDataError`` with the path and position).
Chunks go into one reused buffer: no fresh pages to fault in per read. When a ``SegmentChunks`` closes, its
buffer is kept for the thread's next one (a round reads every segment twice): a new 4 MiB buffer costs its
zeroing and the kernel's, per segment.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType

from service.base.errors import CorruptDataError
from service.storage.file_records import CHUNK_BYTES
from service.storage.records import LOG_OVERHEAD, RecordBatch, decode_batch, peek_batch_size
from service.storage.segment import LogSegment

__all__ = ["RUN_BYTES", "SegmentChunks"]

RUN_BYTES = CHUNK_BYTES
"""How far one C call (``map_batches``, ``filter_batches``) goes into the buffer: Python runs between calls
(the writes; the abort check and the throttle every ``CHUNK_BYTES`` anyway), so larger runs hold the GIL a
smaller share of the time: a whole chunk per call (with two cleaner threads, 1 MiB runs cost ~4x the calls
and their GIL hand-overs)."""


class _SpareBuffer(threading.local):
    """The buffer the thread's last ``SegmentChunks`` closed with (no view of it left), or None; and the
    thread's output buffer for ``filter_batches`` (``SegmentChunks.output_space``)."""

    space: bytearray | None = None
    output: bytearray | None = None


_spare = _SpareBuffer()


def _take_buffer(size: int) -> bytearray:
    space, _spare.space = _spare.space, None
    return space if space is not None and len(space) >= size else bytearray(size)


class SegmentChunks:
    """``position`` is the file position reached; ``chunk()`` gives (buffer, where ``position`` is in it),
    refilled so that the batch at ``position`` is whole in it when it fits before the segment's end."""

    def __init__(self, segment: LogSegment, position: int) -> None:
        self._open(str(segment.log_path), position, segment.size_bytes)

    @classmethod
    def of_range(cls, path: str, position: int, end: int) -> SegmentChunks:
        """The bytes [position, end) of the ``.log`` at ``path``, ``end`` a batch boundary (a split)."""
        chunks = cls.__new__(cls)
        chunks._open(path, position, end)
        return chunks

    def _open(self, path: str, position: int, end: int) -> None:
        self.path = path
        self.end = end
        self.position = position
        self._space = _take_buffer(CHUNK_BYTES)
        self._buf = memoryview(self._space)[:0]
        self._buf_start = position
        self._fd = os.open(self.path, os.O_RDONLY)

    def __enter__(self) -> SegmentChunks:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._buf.release()  # the views chunk() handed out go with it
        os.close(self._fd)
        _spare.space = self._space

    @property
    def has_more(self) -> bool:
        return self.position < self.end

    @property
    def buffer_start(self) -> int:
        """The file position of the buffer's first byte."""
        return self._buf_start

    def chunk(self) -> tuple[memoryview, int]:
        buf, at = self._buf, self.position - self._buf_start
        size = peek_batch_size(buf, at) if len(buf) - at >= LOG_OVERHEAD else 0
        if not size or (size > len(buf) - at and self.position + size <= self.end):
            want = min(max(CHUNK_BYTES, size), self.end - self.position)
            self._buf.release()
            if want > len(self._space):
                self._space = bytearray(want)
            read = os.preadv(self._fd, [memoryview(self._space)[:want]], self.position)
            self._buf, self._buf_start, at = memoryview(self._space)[:read], self.position, 0
        return self._buf, at

    def output_space(self) -> bytearray:
        """Where ``filter_batches`` writes the run it filters from any position of ``chunk()``'s buffer
        (twice the buffer's size, plus 64 KiB: always enough): the thread's own, reused from call to call
        and segment to segment, so no fresh pages per run (its contents last until the next call)."""
        size = 2 * len(self._space) + (64 << 10)
        output = _spare.output
        if output is None or len(output) < size:
            output = _spare.output = bytearray(size)
        return output

    def batch_here(self) -> RecordBatch:
        """The batch at ``position`` (after ``chunk``), decoded by Python, CRC checked."""
        buf, at = self._buf, self.position - self._buf_start
        size = peek_batch_size(buf, at) if len(buf) - at >= LOG_OVERHEAD else LOG_OVERHEAD
        try:
            return decode_batch(buf[at : at + max(size, LOG_OVERHEAD)], 0, position=self.position)
        except CorruptDataError as exc:
            raise exc.at(path=self.path) from exc

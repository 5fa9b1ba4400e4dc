"""Reading record batches out of a ``.log`` file in large chunks (Kafka ``FileRecords``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

from service.base.errors import CorruptDataError
from service.storage.records import LOG_OVERHEAD, RecordBatch, decode_batch, peek_batch_size

__all__ = ["CHUNK_BYTES", "iter_file_batches"]

CHUNK_BYTES = 4 << 20


def iter_file_batches(
    fd: int | None,
    start: int,
    end: int,
    *,
    path: str,
    verify_crc: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
    preread: bytes = b"",
) -> Iterator[RecordBatch]:
    """Every batch between file positions ``start`` and ``end``, in order.

    Raises ``CorruptDataError`` (with ``path`` and the file position) at the first batch that is
    corrupt or does not fit before ``end`` (an incomplete tail after a crash). With ``fd`` None the bytes
    are ``preread``, the file's bytes from ``start`` to ``end`` as the caller read them (a prescan): the
    same batches and errors, no read (a read could only return the same bytes again).
    """
    pos = start
    buf = preread
    buf_start = start
    while pos < end:
        offset_in_buf = pos - buf_start
        if len(buf) - offset_in_buf < LOG_OVERHEAD and fd is not None:
            buf = os.pread(fd, min(chunk_bytes, end - pos), pos)
            buf_start, offset_in_buf = pos, 0
        if len(buf) - offset_in_buf < LOG_OVERHEAD:
            raise CorruptDataError(
                f"incomplete batch: {end - pos} bytes at the end, the log overhead alone is {LOG_OVERHEAD}",
                path=path,
                position=pos,
            )
        size = peek_batch_size(buf, offset_in_buf)
        if size > len(buf) - offset_in_buf and pos + size <= end and fd is not None:
            buf = os.pread(fd, max(chunk_bytes, size), pos)
            buf_start, offset_in_buf = pos, 0
        # At least the log overhead, so that a nonsense size is reported as such, not as a short read.
        view = memoryview(buf)[offset_in_buf : offset_in_buf + max(size, LOG_OVERHEAD)]
        try:
            batch = decode_batch(view, 0, position=pos, verify_crc=verify_crc)
        except CorruptDataError as exc:
            raise exc.at(path=path) from exc
        yield batch
        pos += batch.size_bytes

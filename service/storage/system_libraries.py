"""The system's snappy, lz4 and zstd libraries through ctypes: the compressors ``_codecs.c`` calls, for the
pure-Python path (``LOGCLEANER_PURE_PYTHON=1``, or an install without a compiler).

Compressors of one format do not all write the same bytes: cramjam bundles other builds (snappy's is a Rust
port, its zstd another release) than the system's ``libsnappy.so.1`` and ``libzstd.so.1``. The C path
compresses with the system's libraries, so this path calls the very same functions, and a batch's bytes do
not depend on how logcleaner was installed. A library that does not load is None here and in ``_codecs.c``
alike: both paths then use cramjam for that codec. The calls release the GIL (``ctypes.CDLL``).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from functools import cache

__all__ = ["SnappyLibrary", "Lz4Library", "ZstdLibrary", "lz4_library", "snappy_library", "zstd_library"]


def _load(soname: str) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(soname)
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class SnappyLibrary:
    """``libsnappy``'s C API (``snappy-c.h``)."""

    library: ctypes.CDLL

    def compress_block(self, data: bytes) -> bytes | None:
        """One raw snappy block holding ``data``; None if the library fails (cramjam's turn, as in C)."""
        capacity = self.library.snappy_max_compressed_length(len(data))
        out = ctypes.create_string_buffer(capacity)
        length = ctypes.c_size_t(capacity)
        if self.library.snappy_compress(data, len(data), out, ctypes.byref(length)) != 0:
            return None
        return out.raw[: length.value]


@dataclass(frozen=True, slots=True)
class Lz4Library:
    """``liblz4``'s block API (``lz4.h``)."""

    library: ctypes.CDLL

    def compress_block(self, data: bytes) -> bytes | None:
        """One LZ4 block by the default (fast) compressor, or None where it would not shrink ``data``."""
        capacity = self.library.LZ4_compressBound(len(data))
        out = ctypes.create_string_buffer(capacity)
        written = self.library.LZ4_compress_default(data, out, len(data), capacity)
        return out.raw[:written] if 0 < written < len(data) else None


class _ZstdBuffer(ctypes.Structure):
    """``ZSTD_inBuffer`` and ``ZSTD_outBuffer`` (``zstd.h``): a pointer, its size and the position reached."""

    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


_ZSTD_RESET_SESSION_ONLY = 1
_ZSTD_C_COMPRESSION_LEVEL = 100
_ZSTD_E_CONTINUE, _ZSTD_E_FLUSH, _ZSTD_E_END = 0, 1, 2


class _ZstdContext:
    """A ``ZSTD_CCtx``, freed with its owner (a thread's ``threading.local``, dropped as the thread ends)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.library = library
        self.pointer = library.ZSTD_createCCtx()
        if not self.pointer:
            raise MemoryError("ZSTD_createCCtx returned NULL")

    def __del__(self) -> None:
        self.library.ZSTD_freeCCtx(self.pointer)


@dataclass(frozen=True, slots=True)
class ZstdLibrary:
    """``libzstd``'s streaming API (``zstd.h``), with a context per thread."""

    library: ctypes.CDLL
    contexts: threading.local

    def compress(self, data: bytes, level: int) -> bytes | None:
        """One frame holding ``data`` at ``level``, as ``_codecs.c`` writes it: streamed in, flushed, then
        ended; None if the library fails (then cramjam, as in C)."""
        context: _ZstdContext | None = getattr(self.contexts, "context", None)
        if context is None:
            context = self.contexts.context = _ZstdContext(self.library)
        library, cctx = self.library, context.pointer
        reset = library.ZSTD_CCtx_reset(cctx, _ZSTD_RESET_SESSION_ONLY)
        leveled = library.ZSTD_CCtx_setParameter(cctx, _ZSTD_C_COMPRESSION_LEVEL, level)
        if library.ZSTD_isError(reset) or library.ZSTD_isError(leveled):
            return None
        source = ctypes.c_char_p(data)  # points into ``data``: no copy
        into = _ZstdBuffer(ctypes.cast(source, ctypes.c_void_p), len(data), 0)
        capacity = library.ZSTD_compressBound(len(data)) + 64
        out = ctypes.create_string_buffer(capacity)
        outof = _ZstdBuffer(ctypes.cast(out, ctypes.c_void_p), capacity, 0)
        parts: list[bytes] = []
        for step in (_ZSTD_E_CONTINUE, _ZSTD_E_FLUSH, _ZSTD_E_END):
            while True:
                if outof.pos == outof.size:
                    parts.append(out.raw)
                    outof.pos = 0
                left = library.ZSTD_compressStream2(cctx, ctypes.byref(outof), ctypes.byref(into), step)
                if library.ZSTD_isError(left):
                    return None
                if (into.pos == into.size) if step == _ZSTD_E_CONTINUE else left == 0:
                    break
        parts.append(out.raw[: outof.pos])
        return b"".join(parts)


@cache
def snappy_library() -> SnappyLibrary | None:
    """``libsnappy.so.1`` (Debian's libsnappy1v5), or None where it does not load."""
    library = _load("libsnappy.so.1")
    if library is None:
        return None
    size_t = ctypes.c_size_t
    library.snappy_max_compressed_length.argtypes = [size_t]
    library.snappy_max_compressed_length.restype = size_t
    library.snappy_compress.argtypes = [ctypes.c_char_p, size_t, ctypes.c_char_p, ctypes.POINTER(size_t)]
    library.snappy_compress.restype = ctypes.c_int
    return SnappyLibrary(library)


@cache
def lz4_library() -> Lz4Library | None:
    """``liblz4.so.1``, or None where it does not load."""
    library = _load("liblz4.so.1")
    if library is None:
        return None
    library.LZ4_compressBound.argtypes = [ctypes.c_int]
    library.LZ4_compressBound.restype = ctypes.c_int
    library.LZ4_compress_default.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    library.LZ4_compress_default.restype = ctypes.c_int
    return Lz4Library(library)


@cache
def zstd_library() -> ZstdLibrary | None:
    """``libzstd.so.1``, or None where it does not load (or lacks the streaming API, zstd 1.4 on)."""
    library = _load("libzstd.so.1")
    if library is None:
        return None
    size_t = ctypes.c_size_t
    pointer, buffer = ctypes.c_void_p, ctypes.POINTER(_ZstdBuffer)
    for name, argtypes, restype in [
        ("ZSTD_createCCtx", [], pointer),
        ("ZSTD_freeCCtx", [pointer], size_t),
        ("ZSTD_CCtx_reset", [pointer, ctypes.c_int], size_t),
        ("ZSTD_CCtx_setParameter", [pointer, ctypes.c_int, ctypes.c_int], size_t),
        ("ZSTD_compressStream2", [pointer, buffer, buffer, ctypes.c_int], size_t),
        ("ZSTD_compressBound", [size_t], size_t),
        ("ZSTD_isError", [size_t], ctypes.c_uint),
    ]:
        try:
            function = getattr(library, name)
        except AttributeError:
            return None
        function.argtypes, function.restype = argtypes, restype
    return ZstdLibrary(library, threading.local())

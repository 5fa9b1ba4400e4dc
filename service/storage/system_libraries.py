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


@dataclass(frozen=True, slots=True)
class ZstdLibrary:
    """``libzstd``'s one-shot API (``zstd.h``)."""

    library: ctypes.CDLL

    def compress(self, data: bytes, level: int) -> bytes | None:
        """One zstd frame holding ``data`` at ``level``; None if the library fails (then cramjam, as in C)."""
        capacity = self.library.ZSTD_compressBound(len(data))
        out = ctypes.create_string_buffer(capacity)
        written = self.library.ZSTD_compress(out, capacity, data, len(data), level)
        return None if self.library.ZSTD_isError(written) else out.raw[:written]


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
    """``libzstd.so.1``, or None where it does not load."""
    library = _load("libzstd.so.1")
    if library is None:
        return None
    size_t = ctypes.c_size_t
    library.ZSTD_compressBound.argtypes = [size_t]
    library.ZSTD_compressBound.restype = size_t
    library.ZSTD_compress.argtypes = [ctypes.c_char_p, size_t, ctypes.c_char_p, size_t, ctypes.c_int]
    library.ZSTD_compress.restype = size_t
    library.ZSTD_isError.argtypes = [size_t]
    library.ZSTD_isError.restype = ctypes.c_uint
    return ZstdLibrary(library)

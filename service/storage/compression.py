"""The five record-batch codecs, framed byte for byte as Kafka writes them (Kafka ``common.compress``).

A batch names its codec in attribute bits 0-2; the compressed blob is everything after
``recordsCount``. Where the system has ``libz.so.1``, ``libsnappy.so.1``, ``liblz4.so.1`` and
``libzstd.so.1``, gzip, snappy, lz4 and zstd blobs are compressed by them (``_codecs.compress``: a deflater
and a zstd context reused per thread, no Python object per block), and the cleaner's C loops compress with
the same function. Without that C module the same libraries write them: gzip by the standard library's
``zlib``, the others through ctypes (``system_libraries.py``). A missing snappy, lz4 or zstd library
leaves its codec to cramjam on both paths, a missing libz gzip to ``zlib``. So the bytes of a batch depend
neither on the path nor on how logcleaner was installed (cramjam's bundled codecs, other builds, write
other bytes). The framings the libraries do not write are built here. Decompression tries
``_codecs.decompress`` first (gzip members, xerial-framed or bare snappy, Kafka-framed lz4, zstd frames),
then cramjam, which reads any other framing or names what is wrong.

gzip: one standard gzip stream (RFC 1952) at the zlib default level 6, with the 10-byte header Java's
``GZIPOutputStream`` (JDK 16 on) writes for Kafka: no name or time, OS byte 255 ("unknown"); several members
are read.

zstd: standard zstd frame(s), written at level 3 as Kafka's ``ZstdCompression`` writes one through
zstd-jni's ``ZstdOutputStream``: the input streamed in, so no content size in the header and zstd's
parameters for an unknown size; flushed, so its blocks are not marked last; then ended, with an empty last
block (``01 00 00``).

snappy: snappy-java ("xerial") stream framing, not Google's snappy framing format::

    header   8  magic        82 53 4E 41 50 50 59 00   ("\\x82SNAPPY\\0")
             4  version      int32 BE, 1
             4  min version  int32 BE, 1
    chunk    4  length       int32 BE, bytes of the raw snappy block that follows
             n  block        raw snappy block of at most 32 KiB of input
    ...      chunks repeat to the end; another 16-byte header may start a concatenated stream

  Reading also accepts a bare raw snappy block (no header), as snappy-java does. The version fields
  are not checked on read: some producers write them little-endian (kafka-python issue 2414).

lz4: LZ4 frame (lz4 ``doc/lz4_Frame_format.md``) with independent blocks, which Kafka requires::

    magic       4  04 22 4D 18    0x184D2204 LE
    FLG         1  60             version 01, block independence; no checksums, no content size
    BD          1  40             64 KiB maximum block size
    HC          1  82             (xxHash32(FLG || BD, seed 0) >> 8) & 0xFF
    block       4  size           uint32 LE; high bit set = data stored uncompressed
                n  data           one LZ4 block compressing at most 64 KiB of input
    ...            blocks repeat
    end mark    4  00 00 00 00

  Blocks are compressed with LZ4's default (fast) compressor, as Kafka's ``Lz4BlockOutputStream``
  does at its default level 9; a block that does not shrink is stored. Reading accepts any valid LZ4
  frame (linked blocks, checksums, content size), but not the broken header checksum of magic v0.

Every decoding failure raises :class:`CorruptDataError` naming the codec; empty input is corrupt for
every codec but ``NONE``.
"""

from __future__ import annotations

import enum
import struct
import threading
import zlib
from typing import assert_never

import cramjam

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.native_module import load_native_module
from service.storage.system_libraries import lz4_library, snappy_library, zstd_library

__all__ = [
    "CompressionType",
    "compress",
    "compression_from_name",
    "decompress",
    "system_codecs",
]


class CompressionType(enum.IntEnum):
    """Kafka's codec ids, as stored in record-batch attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """Kafka's name for the codec: ``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd``."""
        return self.name.lower()


_NAMES: dict[str, CompressionType] = {codec.label: codec for codec in CompressionType}
_NAMES["uncompressed"] = CompressionType.NONE  # the broker-side spelling of `none`

_GZIP_LEVEL = 6  # zlib's Z_DEFAULT_COMPRESSION, Kafka's compression.gzip.level = -1
_GZIP_WBITS = 31  # a gzip wrapper around a 32 KiB window (_codecs.c's GZIP_WINDOW_BITS)
_GZIP_OS_OFFSET = 9  # the header's OS byte, which zlib sets to its build's OS (3 on Unix)
_GZIP_OS_UNKNOWN = 0xFF  # what Java's GZIPOutputStream writes there (_codecs.c's GZIP_OS_UNKNOWN)
_ZSTD_LEVEL = 3  # Kafka's compression.zstd.level default (_codecs.c's ZSTD_LEVEL too)

_codecs = load_native_module("service.storage._codecs")  # the system's libraries (``_codecs.c``)

_INT32_BE = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_CHUNK_BYTES = 32 * 1024

_LZ4_MAGIC = _UINT32_LE.pack(0x184D2204)
_LZ4_FLG = 0x60
_LZ4_BD = 0x40
_LZ4_BLOCK_BYTES = 64 * 1024
_LZ4_STORED_FLAG = 0x80000000
_LZ4_END_MARK = _UINT32_LE.pack(0)


_XXH_PRIME1 = 2654435761
_XXH_PRIME2 = 2246822519
_XXH_PRIME3 = 3266489917
_XXH_PRIME4 = 668265263
_XXH_PRIME5 = 374761393
_U32 = 0xFFFFFFFF


def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _U32


def _xxhash32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (enough for a frame descriptor); larger inputs are refused."""
    if len(data) >= 16:
        raise InvalidInputError(f"_xxhash32_short hashes at most 15 bytes, got {len(data)}")
    h = (seed + _XXH_PRIME5 + len(data)) & _U32
    position = 0
    while position + 4 <= len(data):
        (word,) = _UINT32_LE.unpack_from(data, position)
        h = (_rotl32((h + word * _XXH_PRIME3) & _U32, 17) * _XXH_PRIME4) & _U32
        position += 4
    for byte in data[position:]:
        h = (_rotl32((h + byte * _XXH_PRIME5) & _U32, 11) * _XXH_PRIME1) & _U32
    h = ((h ^ (h >> 15)) * _XXH_PRIME2) & _U32
    h = ((h ^ (h >> 13)) * _XXH_PRIME3) & _U32
    return h ^ (h >> 16)


def _lz4_header_checksum(descriptor: bytes) -> int:
    return (_xxhash32_short(descriptor) >> 8) & 0xFF


_LZ4_DESCRIPTOR = bytes((_LZ4_FLG, _LZ4_BD))
_LZ4_HEADER = _LZ4_MAGIC + _LZ4_DESCRIPTOR + bytes((_lz4_header_checksum(_LZ4_DESCRIPTOR),))


def compression_from_name(name: str) -> CompressionType:
    """Return the codec Kafka calls ``name`` (``none``/``uncompressed``, ``gzip``, ...)."""
    try:
        return _NAMES[name]
    except KeyError:
        allowed = ", ".join(sorted(_NAMES))
        raise InvalidInputError(f"unknown compression type {name!r}; allowed: {allowed}") from None


def compress(codec: CompressionType, data: bytes) -> bytes:
    """Compress ``data`` into the blob a ``codec`` batch carries."""
    if codec is CompressionType.NONE:
        return bytes(data)
    packed: bytes | None = None if _codecs is None else _codecs.compress(codec, data)
    if packed is not None:
        return packed
    if codec is CompressionType.SNAPPY:
        return _compress_xerial(memoryview(data))
    if codec is CompressionType.GZIP:
        return _compress_gzip(data)
    if codec is CompressionType.LZ4:
        return _compress_lz4_frame(memoryview(data))
    if codec is CompressionType.ZSTD:
        zstd = zstd_library()
        packed = None if zstd is None else zstd.compress(bytes(data), _ZSTD_LEVEL)
        return packed if packed is not None else _compress_zstd_stream(data)
    assert_never(codec)


def _compress_zstd_stream(data: bytes) -> bytes:
    """cramjam's zstd in Kafka's framing: streamed in, flushed, then ended (an empty last block)."""
    compressor = cramjam.zstd.Compressor(level=_ZSTD_LEVEL)
    compressor.compress(data)
    return bytes(compressor.flush()) + bytes(compressor.finish())


def _compress_gzip(data: bytes) -> bytes:
    """zlib's gzip stream with Java's OS byte; the header has no CRC of its own to mend."""
    packed = bytearray(zlib.compress(data, _GZIP_LEVEL, _GZIP_WBITS))
    packed[_GZIP_OS_OFFSET] = _GZIP_OS_UNKNOWN
    return bytes(packed)


def system_codecs() -> object | None:
    """The C functions ``compress`` uses for gzip, snappy, lz4 and zstd where the system has the libraries,
    and their decompressors, as a capsule (``_codecs.c``, ``system_codecs.h``), for C code that must write
    the same bytes; None without the C module."""
    return None if _codecs is None else _codecs.system_codecs


def decompress(codec: CompressionType, data: bytes | memoryview) -> bytes:
    """Return the bytes a ``codec`` blob holds; raise :class:`CorruptDataError` if it is not one."""
    if codec is CompressionType.NONE:
        return bytes(data)
    view = memoryview(data).cast("B")
    if not view:
        raise CorruptDataError(f"{codec.label}: compressed data is empty")
    inflated: bytes | None = None if _codecs is None else _codecs.decompress(codec, view)
    if inflated is not None:
        return inflated
    if codec is CompressionType.SNAPPY:
        if view[: len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
            return _decompress_xerial(view)
        return bytes(_decompress_snappy_block(view, position=0))
    try:
        if codec is CompressionType.GZIP:
            buffer = cramjam.gzip.decompress(view)
        elif codec is CompressionType.LZ4:
            blocks = _decompress_kafka_lz4(view)
            if blocks is not None:
                return blocks
            buffer = cramjam.lz4.decompress(view)
        elif codec is CompressionType.ZSTD:
            buffer = cramjam.zstd.decompress(view)
        else:
            assert_never(codec)
    except cramjam.DecompressionError as exc:
        raise CorruptDataError(f"{codec.label}: cannot decompress {len(view)} bytes: {exc}") from exc
    return bytes(buffer)


def _compress_xerial(view: memoryview) -> bytes:
    snappy = snappy_library()
    parts: list[bytes | cramjam.Buffer] = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_CHUNK_BYTES):
        chunk = view[start : start + _XERIAL_CHUNK_BYTES]
        block: bytes | cramjam.Buffer | None = None if snappy is None else snappy.compress_block(bytes(chunk))
        if block is None:
            block = cramjam.snappy.compress_raw(chunk)
        parts.append(_INT32_BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _decompress_xerial(view: memoryview) -> bytes:
    parts: list[cramjam.Buffer] = []
    position = 0
    end = len(view)
    while position < end:
        if view[position : position + len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
            if end - position < len(_XERIAL_HEADER):
                raise CorruptDataError(
                    f"snappy: xerial header at position {position} is truncated to {end - position} bytes"
                    f" of {len(_XERIAL_HEADER)}"
                )
            position += len(_XERIAL_HEADER)
            continue
        if end - position < _INT32_BE.size:
            raise CorruptDataError(
                f"snappy: chunk length at position {position} is truncated to {end - position} bytes of 4"
            )
        (length,) = _INT32_BE.unpack_from(view, position)
        position += _INT32_BE.size
        if not 0 < length <= end - position:
            raise CorruptDataError(
                f"snappy: chunk at position {position - _INT32_BE.size} declares {length} bytes;"
                f" allowed 1..{end - position} (the bytes left)"
            )
        parts.append(_decompress_snappy_block(view[position : position + length], position=position))
        position += length
    return b"".join(parts)


def _decompress_snappy_block(block: memoryview, *, position: int) -> cramjam.Buffer:
    try:
        return cramjam.snappy.decompress_raw(block)
    except cramjam.DecompressionError as exc:
        raise CorruptDataError(
            f"snappy: cannot decompress the {len(block)}-byte block at position {position}: {exc}"
        ) from exc


_lz4_scratch = threading.local()  # each thread's block buffer: .block


def _decompress_kafka_lz4(view: memoryview) -> bytes | None:
    """A frame with the header this module writes (and Kafka writes: independent blocks of at most 64 KiB,
    no checksums, no content size), read block by block into a reused buffer; None for any other frame, or
    anything wrong in it, which cramjam's frame reader then reads or refuses. That reader allocates its
    buffers per frame: several times the whole cost of a small batch's frame, which a compacted topic's
    reads pay once a batch."""
    if view[: len(_LZ4_HEADER)] != _LZ4_HEADER:
        return None
    block: bytearray | None = getattr(_lz4_scratch, "block", None)
    if block is None:
        block = _lz4_scratch.block = bytearray(_LZ4_BLOCK_BYTES)
    parts: list[bytes] = []
    position, end = len(_LZ4_HEADER), len(view)
    while end - position >= _UINT32_LE.size:
        (size,) = _UINT32_LE.unpack_from(view, position)
        position += _UINT32_LE.size
        if size == 0:  # the end mark: the frame must end here (concatenated frames are cramjam's)
            return (parts[0] if len(parts) == 1 else b"".join(parts)) if position == end else None
        length = size & ~_LZ4_STORED_FLAG
        if length > min(end - position, _LZ4_BLOCK_BYTES):
            return None
        data = view[position : position + length]
        if size & _LZ4_STORED_FLAG:
            parts.append(bytes(data))
        else:
            try:
                written = cramjam.lz4.decompress_block_into(data, block)
            except cramjam.DecompressionError:
                return None
            parts.append(bytes(memoryview(block)[:written]))
        position += length
    return None


def _compress_lz4_frame(view: memoryview) -> bytes:
    lz4 = lz4_library()
    parts: list[bytes | memoryview | cramjam.Buffer] = [_LZ4_HEADER]
    for start in range(0, len(view), _LZ4_BLOCK_BYTES):
        chunk = view[start : start + _LZ4_BLOCK_BYTES]
        if lz4 is None:
            block: bytes | cramjam.Buffer | None = cramjam.lz4.compress_block(chunk, store_size=False)
        else:
            block = lz4.compress_block(bytes(chunk))  # None: it does not shrink
        if block is not None and len(block) < len(chunk):
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
        else:
            parts.append(_UINT32_LE.pack(len(chunk) | _LZ4_STORED_FLAG))
            parts.append(chunk)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)

"""Kafka's varints: zig-zag encoded, then unsigned LEB128 (protobuf style).

``v → (v << 1) ^ (v >> 63)``, then 7 bits per byte, least significant group first, high bit set on every
byte but the last. A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10.
"""

from __future__ import annotations

from service.base.errors import CorruptDataError

__all__ = ["decode_varint", "encode_varint", "varint_size"]

_MAX_VARLONG_BYTES = 10
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def encode_varint(value: int) -> bytes:
    """Encode a signed int64 (an int32 encodes to the same bytes as Kafka's varint)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varint value {value} is outside int64")
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    if zigzag < 0x80:
        return bytes((zigzag,))
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def varint_size(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes."""
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode the varint at ``buf[pos]``; return ``(value, next position)``."""
    end = len(buf)
    if pos >= end:
        raise CorruptDataError("varint runs past the end of the buffer", position=pos)
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    result = byte & 0x7F
    shift = 7
    start = pos
    pos += 1
    while True:
        if pos >= end:
            raise CorruptDataError("varint runs past the end of the buffer", position=start)
        if pos - start >= _MAX_VARLONG_BYTES:
            raise CorruptDataError("varint is longer than 10 bytes", position=start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    if result > 0xFFFF_FFFF_FFFF_FFFF:
        raise CorruptDataError("varint overflows int64", position=start)
    return (result >> 1) ^ -(result & 1), pos

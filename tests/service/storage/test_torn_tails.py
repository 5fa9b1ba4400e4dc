"""Every shape a crash can leave at the end of the active segment: recovery keeps the good prefix, truncates
the tail, and the log takes appends again (as Kafka checks the size and reads the whole batch
before it looks at the magic byte)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from service.base.errors import CorruptDataError, UnsupportedFormatError
from service.storage.records import Record, decode_batch, encode_batch
from tests.service.storage.conftest import MakeLog, OpenLog, keyed

# A batch the crash was writing when it struck: the bytes that reached the disk are shaped from it.
_NEXT = encode_batch([Record(5, 1005, b"k5", b"v5" * 40)], base_offset=5)


def _zeros() -> bytes:
    return bytes(100)


def _partial_header() -> bytes:
    return _NEXT[:7]


def _header_then_zeros() -> bytes:
    """A torn page: the 12-byte header (offset, length) landed, the rest of the batch is zeros."""
    return _NEXT[:12] + bytes(len(_NEXT) - 12)


def _header_then_zeros_with_room_to_spare() -> bytes:
    return _NEXT[:12] + bytes(len(_NEXT) + 4096)


def _huge_length() -> bytes:
    return struct.pack(">qi", 5, 0x7FFFFFF0) + _NEXT[12:]


def _huge_length_then_zeros() -> bytes:
    return struct.pack(">qi", 5, 0x7FFFFFF0) + bytes(200)


def _cut_inside_records() -> bytes:
    return _NEXT[: len(_NEXT) - 20]


def _wrong_crc() -> bytes:
    torn = bytearray(_NEXT)
    torn[-3] ^= 0x55
    return bytes(torn)


def _negative_length() -> bytes:
    return struct.pack(">qi", 5, -7) + bytes(80)


TORN_TAILS: dict[str, Callable[[], bytes]] = {
    "zeros": _zeros,
    "partial-header": _partial_header,
    "header-then-zeros": _header_then_zeros,
    "header-then-more-zeros": _header_then_zeros_with_room_to_spare,
    "huge-length": _huge_length,
    "huge-length-then-zeros": _huge_length_then_zeros,
    "cut-inside-records": _cut_inside_records,
    "wrong-crc": _wrong_crc,
    "negative-length": _negative_length,
}


def _good_prefix(make_log: MakeLog) -> list[Record]:
    log = make_log()
    for i in range(5):
        log.append_records([keyed(b"k%d" % i, b"v%d" % i, timestamp=1000 + i)])
    records = log.read(0)
    log.close()
    return records


@pytest.mark.parametrize("shape", sorted(TORN_TAILS))
@pytest.mark.parametrize("recovery_point", [0, 5])
def test_torn_tail_after_an_unclean_stop_is_truncated(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path, shape: str, recovery_point: int
) -> None:
    records = _good_prefix(make_log)
    active = log_dir / f"{0:020d}.log"
    good_size = active.stat().st_size
    tail = TORN_TAILS[shape]()
    with open(active, "ab") as f:
        f.write(tail)

    result = open_log(recovery_point=recovery_point)

    log = result.log
    assert log.read(0) == records
    assert log.log_end_offset == 5
    assert result.truncated_bytes == len(tail)
    assert active.stat().st_size == good_size
    log.append_records([keyed(b"after", b"restart")])
    appended = log.read(5)
    assert [r.key for r in appended] == [b"after"]
    log.close()
    assert open_log(clean_shutdown=True).log.read(0) == [*records, *appended]


def test_a_torn_tail_in_an_otherwise_empty_segment_leaves_it_empty(open_log: OpenLog, log_dir: Path) -> None:
    (log_dir / f"{0:020d}.log").write_bytes(_header_then_zeros())
    result = open_log()
    assert result.log.log_end_offset == 0
    assert result.truncated_bytes == len(_NEXT)


def test_header_then_zeros_is_corrupt_not_an_old_format() -> None:
    """The zero at the magic byte's place means nothing until the batch is whole and its CRC checked."""
    with pytest.raises(CorruptDataError) as caught:
        decode_batch(_header_then_zeros(), position=70)
    assert not isinstance(caught.value, UnsupportedFormatError)
    assert caught.value.position == 70
    assert "CRC" in caught.value.reason


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_an_old_format_batch_fails_the_load_and_leaves_the_log_alone(
    make_log: MakeLog, open_log: OpenLog, log_dir: Path, clean_shutdown: bool
) -> None:
    """A magic 1 message whose own CRC holds is a real old segment, not a torn tail: never truncated."""
    _good_prefix(make_log)
    body = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">ii", -1, 3) + b"old"
    message = struct.pack(">I", zlib.crc32(body)) + body
    active = log_dir / f"{0:020d}.log"
    with open(active, "ab") as f:
        f.write(struct.pack(">qi", 5, len(message)) + message)
    before = {p.name: p.read_bytes() for p in log_dir.iterdir()} if clean_shutdown else None
    log_bytes = active.read_bytes()
    with pytest.raises(UnsupportedFormatError, match="magic 1"):
        open_log(clean_shutdown=clean_shutdown)
    assert active.read_bytes() == log_bytes
    if before is not None:  # after a clean stop nothing at all is written
        assert {p.name: p.read_bytes() for p in log_dir.iterdir()} == before

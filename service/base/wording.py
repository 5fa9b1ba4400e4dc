"""English for the lines people read: counts with the right number (``1 segment``, ``2 segments``), UTC
dates in ISO 8601 and durations in their two largest units (``1d 0h``, ``3h 12m``, ``45s``)."""

from __future__ import annotations

import time

__all__ = ["counted", "human_bytes", "human_duration", "utc_date"]

_FIRST_DATE_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
_PAST_LAST_DATE_MS = 253_402_300_800_000  # 10000-01-01T00:00:00Z
_UNITS_MS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless the count is one (``plural``: an irregular plural)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def human_duration(duration_ms: int) -> str:
    """``1d 0h``, ``3h 12m``, ``4m 5s``, ``45s``, ``850ms``: the two largest units, rounded down."""
    if duration_ms < 0:
        return "-" + human_duration(-duration_ms)
    if duration_ms < 1000:
        return f"{duration_ms}ms"
    for i, (unit, size) in enumerate(_UNITS_MS[:-1]):
        if duration_ms >= size:
            next_unit, next_size = _UNITS_MS[i + 1]
            return f"{duration_ms // size}{unit} {duration_ms % size // next_size}{next_unit}"
    return f"{duration_ms // 1000}s"


def utc_date(timestamp_ms: int) -> str:
    """``2026-11-28T02:32:07Z``; a timestamp no calendar holds (before year 1 or past 9999) as its ms.
    Formatted by ``time.strftime``: half the cost of a ``datetime``, for the many dates of ``explain``."""
    if not _FIRST_DATE_MS <= timestamp_ms < _PAST_LAST_DATE_MS:
        return f"{timestamp_ms} ms since the epoch"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp_ms // 1000))


def human_bytes(size: int) -> str:
    """``1.2 GiB``, ``340.0 MiB``, ``12.5 KiB``, ``900 B``: binary units, one decimal."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"

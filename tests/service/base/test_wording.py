"""``wording``: the English of the lines people read: counts with the right number, durations in their two
largest units rounded down, UTC dates in ISO 8601 (and a timestamp no calendar holds as its ms), and
binary byte sizes with one decimal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.wording import counted, human_bytes, human_duration, utc_date

SECOND, MINUTE, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000


@pytest.mark.parametrize(
    ("count", "noun", "plural", "expected"),
    [
        (1, "segment", None, "1 segment"),
        (0, "segment", None, "0 segments"),
        (2, "segment", None, "2 segments"),
        (-1, "segment", None, "-1 segments"),
        (1, "index", "indexes", "1 index"),
        (3, "index", "indexes", "3 indexes"),
        (2, "log dir", None, "2 log dirs"),
    ],
)
def test_counted_is_singular_for_one_only(count: int, noun: str, plural: str | None, expected: str) -> None:
    assert counted(count, noun, plural) == expected


@pytest.mark.parametrize(
    ("duration_ms", "expected"),
    [
        (0, "0ms"),
        (850, "850ms"),
        (999, "999ms"),
        (SECOND, "1s"),
        (45 * SECOND + 999, "45s"),  # rounded down, not up
        (MINUTE, "1m 0s"),
        (4 * MINUTE + 5 * SECOND, "4m 5s"),
        (3 * HOUR + 12 * MINUTE + 59 * SECOND, "3h 12m"),  # two units only
        (DAY, "1d 0h"),
        (DAY - 1, "23h 59m"),
        (400 * DAY + 5 * HOUR, "400d 5h"),  # days are the largest unit
        (-(3 * HOUR + 12 * MINUTE), "-3h 12m"),
        (-5, "-5ms"),
    ],
)
def test_human_duration_names_the_two_largest_units(duration_ms: int, expected: str) -> None:
    assert human_duration(duration_ms) == expected


@given(st.integers(0, 10**15))
def test_human_duration_never_overstates(duration_ms: int) -> None:
    """The units shown add up to at most the duration, and to more than it less one unit of the last."""
    units = {"d": DAY, "h": HOUR, "m": MINUTE, "s": SECOND, "ms": 1}
    shown = 0
    last = 1
    for part in human_duration(duration_ms).split():
        number = int(part.rstrip("dhms"))
        unit = part[len(str(number)) :]
        shown += number * units[unit]
        last = units[unit]
    assert shown <= duration_ms < shown + last


@pytest.mark.parametrize(
    ("timestamp_ms", "expected"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1_764_297_127_999, "2025-11-28T02:32:07Z"),  # milliseconds dropped, not rounded
        (-1000, "1969-12-31T23:59:59Z"),
        (253_402_300_799_000, "9999-12-31T23:59:59Z"),
        (253_402_300_800_000, "253402300800000 ms since the epoch"),  # year 10000
        (-62_135_596_800_001, "-62135596800001 ms since the epoch"),  # before year 1
        ((1 << 63) - 1, f"{(1 << 63) - 1} ms since the epoch"),  # Long.MAX_VALUE: "no limit" in Kafka
    ],
)
def test_utc_date(timestamp_ms: int, expected: str) -> None:
    assert utc_date(timestamp_ms) == expected


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (0, "0 B"),
        (900, "900 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (12_800, "12.5 KiB"),
        (340 * (1 << 20), "340.0 MiB"),
        (int(1.2 * (1 << 30)), "1.2 GiB"),
        (5 * (1 << 40), "5120.0 GiB"),  # GiB is the largest unit
    ],
)
def test_human_bytes_uses_binary_units(size: int, expected: str) -> None:
    assert human_bytes(size) == expected

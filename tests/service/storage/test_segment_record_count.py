"""``LogSegment.record_count``, kept as the segment grows (each batch header read once), against the records
appended: after any run of appends, counts and truncations it says what the file holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.storage.log_config import LogConfig
from service.storage.records import Record, encode_batch
from service.storage.segment import LogSegment

# Each step: append a batch of n records (n ≥ 1), ask the count (0), or truncate to a batch boundary (-k:
# drop the last k batches).
steps = st.lists(st.integers(-3, 6), min_size=1, max_size=30)


def append(segment: LogSegment, next_offset: int, records: int) -> int:
    batch = encode_batch(
        [Record(next_offset + i, 1_000, b"k%d" % i, b"v") for i in range(records)], base_offset=next_offset
    )
    last = next_offset + records - 1
    segment.append(batch, largest_offset=last, max_timestamp=1_000, offset_of_max_timestamp=last)
    return len(batch)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=steps)
def test_the_count_follows_appends_and_truncations(
    tmp_path_factory: pytest.TempPathFactory, spec: list[int]
) -> None:
    directory: Path = tmp_path_factory.mktemp("segment")
    segment = LogSegment.create(directory, 0, config=LogConfig(), now_ms=0)
    batches: list[tuple[int, int]] = []  # (bytes, records) of each batch in the file
    next_offset = 0
    try:
        for step in spec:
            if step > 0:
                batches.append((append(segment, next_offset, step), step))
                next_offset += step
            elif step < 0 and batches:
                del batches[step:]
                segment.truncate_to_position(sum(size for size, _ in batches))
                next_offset = sum(records for _, records in batches)
            assert segment.record_count() == sum(records for _, records in batches)
    finally:
        segment.close()

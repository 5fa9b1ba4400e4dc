"""A read that meets a cleaning round's swap and the deletion of the replaced files (``file.delete.delay.ms``
0): the segment it has open is read to its end from its descriptor, and the replaced segments it had
listed are read from their cleaned replacement instead; never a ``FileNotFoundError``."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import ManualClock
from tests.cleaner.helpers import clean, keyed, new_log

KEYS = 5
RECORDS = 60


def test_a_read_across_a_swap_reads_the_open_segment_then_the_cleaned_one(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    log = new_log(tmp_path / "t-0", clock, segment_bytes=400)
    for i in range(RECORDS):
        log.append_records([keyed(i % KEYS, b"%d@%d" % (i % KEYS, i))])
    old = log.segments
    assert len(old) >= 4
    reader = log.read_batches(0)
    read = [next(reader)]  # the first segment is open, the others listed

    clean(log, clock)  # the swap, then the replaced files deleted at once
    assert not list((tmp_path / "t-0").glob("*.log.deleted"))
    assert all(s is not old[1] for s in log.segments), "the listed segment after the open one was replaced"

    read += list(reader)
    records = [(r.offset, r.value) for batch in read for r in batch.records()]
    positions = [offset for offset, _ in records]
    assert positions == sorted(set(positions)), "no offset twice, none out of order"
    assert records == [(o, b"%d@%d" % (o % KEYS, o)) for o in positions], "each record as written"
    first_end = old[1].base_offset
    assert positions[:first_end] == list(range(first_end)), "the open segment read to its end"
    # The round cleans below the active segment, whose last full segment holds each key's latest there.
    assert positions[first_end:] == list(range(old[-2].base_offset, RECORDS)), "then what the cleaning kept"

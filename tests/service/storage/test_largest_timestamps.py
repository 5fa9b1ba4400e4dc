"""``read_largest_timestamps``: the sealed segments' time-index edges read in one C call give the largest
timestamps each segment reads itself, and a file it cannot read whole is left to the segment to judge."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.storage import prescan
from service.storage.largest_timestamps import read_largest_timestamps
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from tests.service.storage.conftest import keyed

pytestmark = pytest.mark.skipif(not prescan.has_dirscan(), reason="the C scan is not built")

CONFIG = LogConfig(segment_bytes=300, index_interval_bytes=1)
COUNT = 37


def written(directory: Path, clock: ManualClock) -> None:
    """``COUNT`` records, record i stamped 1000 + i, over several segments; closed cleanly."""
    log = load_partition_log(directory, CONFIG, clock=clock).log
    for i in range(COUNT):
        log.append_records([keyed(b"k%d" % i, b"v%d" % i, timestamp=1000 + i)])
    log.close()


def reloaded(directory: Path, clock: ManualClock) -> PartitionLog:
    """The log as a clean start-up loads it: the sealed segments' largest timestamps not read yet."""
    return load_partition_log(directory, CONFIG, clock=clock, clean_shutdown=True, recovery_point=COUNT).log


def time_index(directory: Path, base: int) -> Path:
    return directory / f"{base:020d}.timeindex"


def test_the_edges_read_ahead_give_each_sealed_segment_its_largest_timestamp(
    log_dir: Path, clock: ManualClock
) -> None:
    written(log_dir, clock)
    plain = reloaded(log_dir, clock)
    expected = [s.largest_timestamp() for s in plain.segments[:-1]]
    plain.close()
    log = reloaded(log_dir, clock)
    sealed = log.segments[:-1]
    assert len(sealed) >= 3
    assert read_largest_timestamps(sealed) == len(sealed)
    for segment in sealed:  # the segments no longer need their files for it
        time_index(log_dir, segment.base_offset).unlink()
    assert [s.largest_timestamp() for s in sealed] == expected
    assert [t for t, _ in expected] == [1000 + later.base_offset - 1 for later in log.segments[1:]]
    assert read_largest_timestamps(sealed) == 0  # known now: nothing more to read
    log.abandon()


def test_a_time_index_not_read_whole_is_left_to_the_segment(log_dir: Path, clock: ManualClock) -> None:
    """A partial entry or a missing file: not primed, and the segment's own read says what is wrong."""
    written(log_dir, clock)
    log = reloaded(log_dir, clock)
    first, second, *rest = log.segments[:-1]
    time_index(log_dir, first.base_offset).write_bytes(bytes(13))
    time_index(log_dir, second.base_offset).unlink()
    assert read_largest_timestamps([first, second, *rest]) == len(rest)
    with pytest.raises(CorruptDataError, match="13"):
        first.largest_timestamp()
    assert second.time_index_edges_wanted() is not None
    log.abandon()


def test_edges_out_of_order_fail_as_the_file_does(log_dir: Path, clock: ManualClock) -> None:
    """A sealed time index whose last timestamp is below its first raises the same error either way."""
    written(log_dir, clock)
    base = reloaded(log_dir, clock).segments[0].base_offset
    time_index(log_dir, base).write_bytes(
        (2000).to_bytes(8, "big") + bytes(4) + (1000).to_bytes(8, "big") + (1).to_bytes(4, "big")
    )

    def error_of_first_segment(*, read_ahead: bool) -> str:
        log = reloaded(log_dir, clock)
        try:
            if read_ahead:
                assert read_largest_timestamps(log.segments[:1]) == 1
            with pytest.raises(CorruptDataError) as raised:
                log.segments[0].largest_timestamp()
            return str(raised.value)
        finally:
            log.abandon()

    errors = [error_of_first_segment(read_ahead=False), error_of_first_segment(read_ahead=True)]
    assert errors[0] == errors[1]
    assert "below the first timestamp" in errors[0]


def test_a_segment_whose_time_index_is_built_wants_no_edges(log_dir: Path, clock: ManualClock) -> None:
    written(log_dir, clock)
    log = reloaded(log_dir, clock)
    active = log.segments[-1]
    active.time_index.entries  # noqa: B018  # built: it answers for itself
    assert active.time_index_edges_wanted() is None
    assert read_largest_timestamps([active]) == 0
    log.abandon()

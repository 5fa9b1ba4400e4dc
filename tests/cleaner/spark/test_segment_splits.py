"""``plan_splits``, without Spark: the ``kafka-log`` data source's input partitions. Each segment of a
partition dir is one split unless larger than ``max_split_bytes``, then cut at its offset-index entries
(batch starts, each once the split reached the size), the splits covering it exactly; a log dir gives its
partitions in (topic, partition) order, skipping ``-delete``/``-future``/``-stray`` dirs; segments wholly
outside [from, until) are not read; a bad path or split size is refused. (Spark SQL over the splits is
``test_data_source.py``'s.)"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from cleaner.spark.segment_splits import SegmentSplit, plan_splits
from service.base.clock import ManualClock
from service.base.errors import InvalidInputError, NotFoundError
from tests.cleaner.helpers import keyed, new_log

NOW_MS = 1_700_000_000_000


def write_partition(directory: Path, records: int, *, segment_bytes: int = 1024) -> None:
    """``records`` one-record batches (70 bytes each) with an index entry every batch; closed cleanly."""
    log = new_log(directory, ManualClock(NOW_MS), segment_bytes=segment_bytes, index_interval_bytes=1)
    for n in range(records):
        log.append_records([keyed(n % 10, n)])
    log.close()


def covered(splits: list[SegmentSplit]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for split in splits:
        out.setdefault(split.segment_base_offset, []).append((split.start_position, split.end_position))
    return out


def test_a_segment_is_one_split_or_cut_at_index_entries_covering_it_exactly(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    write_partition(directory, 30, segment_bytes=1 << 20)  # one segment
    size = (directory / f"{0:020d}.log").stat().st_size

    [whole] = plan_splits(directory)
    cut = plan_splits(directory, max_split_bytes=500)

    assert (whole.topic, whole.partition, whole.start_position, whole.end_position) == ("t", 0, 0, size)
    positions = [(s.start_position, s.end_position) for s in cut]
    assert positions[0][0] == 0 and positions[-1][1] == size
    assert all(a[1] == b[0] for a, b in pairwise(positions))  # contiguous
    # each cut at the first batch start at least 500 bytes on: a split is 500 bytes and at most a batch more
    assert len(cut) > 1 and all(500 <= end - start < 500 + 80 for start, end in positions[:-1])


def test_a_log_dir_gives_its_partitions_in_order_and_skips_others(tmp_path: Path) -> None:
    for name in ("b-0", "a-1", "a-0", "a-2.0f1e2d3c4b5a69788796a5b4c3d2e1f0-stray", "c-0.abc-delete"):
        write_partition(tmp_path / name, 3)
    (tmp_path / "a-0" / f"{0:020d}.log.cleaned").write_bytes(b"in flight")

    splits = plan_splits(tmp_path)

    assert [(s.topic, s.partition) for s in splits] == [("a", 0), ("a", 1), ("b", 0)]
    assert all(s.log_path.endswith(".log") for s in splits)


def test_segments_outside_the_offsets_asked_for_are_not_read(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    write_partition(directory, 60)  # 1024-byte segments: several
    bases = sorted(int(p.name[:20]) for p in directory.glob("*.log"))
    assert len(bases) >= 3

    splits = plan_splits(directory, from_offset=bases[1], until_offset=bases[2])

    assert covered(splits).keys() == {bases[1]}
    assert all((s.from_offset, s.until_offset) == (bases[1], bases[2]) for s in splits)


def test_a_bad_path_or_split_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="not a directory"):
        plan_splits(tmp_path / "absent")
    with pytest.raises(InvalidInputError, match="maxSplitBytes must be > 0, got 0"):
        plan_splits(tmp_path, max_split_bytes=0)

"""``oracle``: the reference cleaning the Spark path is held to. ``clean_in_process`` is one plain round at a
given time, its replaced files deleted at once; ``log_contents`` is everything a reader can observe of a log,
batch by batch, so two logs compare equal exactly when a reader cannot tell them apart. (The oracle against
the Spark engine is ``tests/cleaner/spark/test_engine_oracle.py``'s; the rules against a model, here in
``test_properties.py``.)"""

from __future__ import annotations

from pathlib import Path

from cleaner.compaction.oracle import BatchView, clean_in_process, log_contents
from service.base.clock import ManualClock
from service.storage.log import PartitionLog
from tests.cleaner.helpers import DAY_MS, keyed, new_log, tomb

NOW_MS = 1_700_000_000_000


def write(log: PartitionLog) -> None:
    """Keys 0-9 three times over, then a tombstone for key 3, then more batches to roll past them."""
    for round_ in range(3):
        for key in range(10):
            log.append_records([keyed(key, round_ * 10 + key, timestamp=NOW_MS)])
    log.append_records([tomb(3, timestamp=NOW_MS)])
    for key in range(10, 25):
        log.append_records([keyed(key, key, timestamp=NOW_MS)])


def test_log_contents_is_every_batch_in_order_as_a_reader_sees_it(tmp_path: Path) -> None:
    clock = ManualClock(NOW_MS)
    one, two = new_log(tmp_path / "a-0", clock), new_log(tmp_path / "b-0", clock)
    write(one)
    write(two)

    contents = log_contents(one)

    assert all(isinstance(view, BatchView) for view in contents)
    assert [view.base_offset for view in contents] == list(range(one.log_end_offset))
    assert [view.records[0].key for view in contents][:3] == [b"0", b"1", b"2"]
    assert contents == log_contents(two)  # the same appends: a reader cannot tell them apart
    two.append_records([keyed(0, 99, timestamp=NOW_MS)])
    assert contents != log_contents(two)


def test_one_round_keeps_the_latest_value_of_each_key_and_deletes_at_once(tmp_path: Path) -> None:
    log = new_log(tmp_path / "t-0", ManualClock(NOW_MS))
    write(log)
    upper = log.active_segment.base_offset

    result = clean_in_process(log, 0, upper, NOW_MS)

    assert result.end_offset == upper
    below = [view for view in log_contents(log) if view.last_offset < upper]
    values = {r.key: r.value for view in below for r in view.records}
    assert values[b"3"] is None  # the tombstone, within its delete horizon
    assert values[b"0"] == b"20" and values[b"9"] == b"29"  # the latest of each key
    assert len([r for view in below for r in view.records if r.key == b"0"]) == 1
    assert not [p for p in log.directory.iterdir() if p.name.endswith((".deleted", ".cleaned", ".swap"))]


def test_a_round_past_the_delete_horizon_drops_the_tombstone(tmp_path: Path) -> None:
    log = new_log(tmp_path / "t-0", ManualClock(NOW_MS))
    write(log)
    upper = log.active_segment.base_offset
    clean_in_process(log, 0, upper, NOW_MS)  # the first round sets the tombstone's delete horizon

    clean_in_process(log, 0, upper, NOW_MS + DAY_MS + 1)

    keys = [r.key for view in log_contents(log) if view.last_offset < upper for r in view.records]
    assert b"3" not in keys and b"4" in keys

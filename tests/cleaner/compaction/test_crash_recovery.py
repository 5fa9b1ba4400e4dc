"""A crash at each step of the swap protocol, then a reload (Kafka's LogCleanerTest.testRecoveryAfterCrash).

A crash before the ``.swap`` exists leaves the original keys; once the swap file exists the loader
completes the swap and the cleaned keys are there.
"""

from __future__ import annotations

import os
from pathlib import Path

from cleaner.compaction.cleaner import Cleaner
from cleaner.compaction.rules import active_producers
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from tests.cleaner.helpers import LONG_MAX, compact_config, keyed, keys, recover_and_check


def fill(log: PartitionLog) -> None:
    while len(log.segments) < 10:
        log.append_records([keyed(log.log_end_offset)])


def clean_first_nine(log: PartitionLog, clock: ManualClock) -> list[int]:
    """cleanSegments over the first 9 segments with every odd key superseded; deletions never run."""
    group = log.segments[:9]
    cleaner = Cleaner(clock=clock, schedule_delete=lambda _delay, _task: None)
    cleaner.clean_segments(
        log,
        group,
        lookup=lambda key: LONG_MAX if int(key) % 2 else -1,
        map_latest_offset=LONG_MAX,
        upper_bound=group[-1].read_next_offset(),
        now_ms=clock.now_ms(),
        txn_state=CleanedTransactionMetadata(),
        active_producers=active_producers(log),
        stats=CleanerStats(),
    )
    return keys(log)


def restore_deleted(directory: Path) -> None:
    for path in directory.iterdir():
        if path.name.endswith(DELETED_SUFFIX):
            os.replace(path, path.with_name(path.name[: -len(DELETED_SUFFIX)]))


def add_suffix(log_dir: Path, base_offset: int, suffix: str) -> None:
    """Rename a closed segment's files by path, as a crash in the middle of a swap leaves them (a closed
    segment refuses to touch its files itself)."""
    stem = f"{base_offset:020d}"
    for ext in (".log", ".index", ".timeindex", ".txnindex"):
        path = log_dir / (stem + ext)
        if path.exists():
            os.replace(path, str(path) + suffix)


def test_recovery_after_crash(log_dir: Path, clock: ManualClock) -> None:
    config = compact_config(segment_bytes=300, index_interval_bytes=1, file_delete_delay_ms=10)
    log_dir.mkdir()
    log = load_partition_log(log_dir, config, clock=clock).log
    fill(log)
    all_keys = keys(log)
    cleaned_keys = clean_first_nine(log, clock)
    assert cleaned_keys == [k for k in all_keys if k % 2 == 0 or k >= log.segments[1].base_offset]
    log.close()

    # 1) crash after the .cleaned files were written, before any .swap: the round is lost
    add_suffix(log_dir, log.segments[0].base_offset, CLEANED_SUFFIX)
    restore_deleted(log_dir)
    log = recover_and_check(log_dir, config, clock, all_keys)

    # 2) crash with the .log renamed to .swap but the indexes still .cleaned: the round is lost
    clean_first_nine(log, clock)
    log.close()
    first = log.segments[0]
    add_suffix(log_dir, first.base_offset, CLEANED_SUFFIX)
    os.replace(str(first.log_path) + CLEANED_SUFFIX, str(first.log_path) + SWAP_SUFFIX)
    restore_deleted(log_dir)
    log = recover_and_check(log_dir, config, clock, all_keys)

    # 3) crash with the whole segment .swap, the old segments not yet renamed: the swap completes
    cleaned_keys = clean_first_nine(log, clock)
    log.close()
    add_suffix(log_dir, log.segments[0].base_offset, SWAP_SUFFIX)
    restore_deleted(log_dir)
    log = recover_and_check(log_dir, config, clock, cleaned_keys)

    # 4) crash with the segment .swap and the old segments already .deleted: the swap completes
    fill(log)
    cleaned_keys = clean_first_nine(log, clock)
    log.segments[0].change_file_suffixes("", SWAP_SUFFIX)
    log = recover_and_check(log_dir, config, clock, cleaned_keys)

    # 5) crash with only the time index still .swap: the rename is finished
    fill(log)
    cleaned_keys = clean_first_nine(log, clock)
    time_index = log.segments[0].time_index.path
    os.replace(time_index, str(time_index) + SWAP_SUFFIX)
    log = recover_and_check(log_dir, config, clock, cleaned_keys)

    # 6) crash after the swap, with the old segments' deletion still pending
    fill(log)
    cleaned_keys = clean_first_nine(log, clock)
    log.close()
    recover_and_check(log_dir, config, clock, cleaned_keys)

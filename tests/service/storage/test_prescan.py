"""The prescan (``service/storage/prescan.py``, ``_dirscan.c``): a clean load from a scan is the load the
loader makes with its own calls, whatever the dir holds, and the scan runs under the log dir's lock."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.errors import ConflictError, CorruptDataError
from service.core.log_manager import LogManager
from service.core.stray_replicas import survey_replica_dirs
from service.core.tasks import DeferredTasks
from service.storage import loader, prescan
from service.storage.clean_shutdown import write_clean_shutdown_marker
from service.storage.dir_lock import LogDirLock
from service.storage.loader import LoadResult, load_partition_log
from service.storage.log_config import LogConfig
from service.storage.partition_metadata import PARTITION_METADATA_FILE, write_partition_metadata
from service.storage.prescan import LogDirPrescan, PartitionScan, start_early_prescans
from service.storage.producer_snapshot import list_snapshot_offsets
from service.storage.segment_loading import _sort_out_names, segments_checked_in_c
from service.storage.topic_partition import TopicPartition
from tests.service.storage.conftest import keyed

pytestmark = pytest.mark.skipif(not prescan.has_dirscan(), reason="the C scan is not built")

SEGMENT_BYTES = 300
CONFIG = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1)
COUNT = 37  # the active segment holds one record


def scan_of(
    directory: Path, max_read: int = prescan.MAX_READ_BYTES, *, time_edges: bool = False
) -> PartitionScan:
    module = prescan._dirscan
    assert module is not None
    [item] = module.scan_partitions(str(directory.parent), [directory.name], max_read, time_edges)
    scan = prescan._scan_of(item)
    assert scan is not None
    return scan


def fill(directory: Path, clock: ManualClock, count: int = COUNT) -> None:
    log = load_partition_log(directory, CONFIG, clock=clock).log
    for i in range(count):
        log.append_records([keyed(b"k%d" % i, b"v%d" % i, timestamp=1000 + i)])
    log.close()


def fingerprint(result: LoadResult) -> tuple[object, ...]:
    log = result.log
    return (
        result.recovered_segments,
        result.truncated_bytes,
        log.log_start_offset,
        log.log_end_offset,
        log.recovery_point,
        [(s.base_offset, s.size_bytes) for s in log.segments],
        [(r.offset, r.key, r.value) for r in log.read(0, max_records=10_000)],
        [(s.largest_timestamp(), s.time_index.entries) for s in log.segments[:-1]],  # the active's: mtime
    )


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def seg(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{base:020d}{suffix}"


def bases(directory: Path) -> list[int]:
    return sorted(int(p.stem) for p in directory.glob("*.log"))


def truncate_active_log(d: Path) -> None:
    path = seg(d, bases(d)[-1], ".log")
    os.truncate(path, path.stat().st_size - 5)


def garbage_after_active_log(d: Path) -> None:
    with seg(d, bases(d)[-1], ".log").open("ab") as file:
        file.write(b"\x00" * 40)


def drop(base_of: Callable[[list[int]], int], suffix: str) -> Callable[[Path], None]:
    return lambda d: seg(d, base_of(bases(d)), suffix).unlink()


def partial_index_entry(d: Path) -> None:
    with seg(d, bases(d)[0], ".index").open("ab") as file:
        file.write(b"\x01\x02\x03")


def active_index_past_the_log(d: Path) -> None:
    path = seg(d, bases(d)[-1], ".index")
    path.write_bytes(path.read_bytes() + (1).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))


def active_time_index_past_the_log(d: Path) -> None:
    path = seg(d, bases(d)[-1], ".timeindex")
    path.write_bytes(path.read_bytes() + (10**13).to_bytes(8, "big") + (10**6).to_bytes(4, "big"))


def active_index_not_rising(d: Path) -> None:
    entry = (5).to_bytes(4, "big") + (0).to_bytes(4, "big")
    seg(d, bases(d)[-1], ".index").write_bytes(entry + (3).to_bytes(4, "big") + (0).to_bytes(4, "big"))


def active_log_old_magic(d: Path) -> None:
    path = seg(d, bases(d)[-1], ".log")
    data = bytearray(path.read_bytes())
    data[16] = 1
    path.write_bytes(bytes(data))


def pending_deletion(d: Path) -> None:
    shutil.copy(seg(d, bases(d)[0], ".log"), d / "00000000000000000999.log.deleted")


def orphan_index(d: Path) -> None:
    shutil.copy(seg(d, bases(d)[0], ".index"), seg(d, 999, ".index"))


def stray_snapshot(d: Path) -> None:
    shutil.copy(seg(d, bases(d)[-1], ".snapshot"), seg(d, 5, ".snapshot"))


def empty_txn_index(d: Path) -> None:
    seg(d, bases(d)[0], ".txnindex").write_bytes(b"")


def unknown_file(d: Path) -> None:
    (d / "notes.txt").write_bytes(b"x")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "healthy": lambda d: None,
    "active log truncated": truncate_active_log,
    "garbage after the active log": garbage_after_active_log,
    "active offset index missing": drop(lambda b: b[-1], ".index"),
    "active time index missing": drop(lambda b: b[-1], ".timeindex"),
    "sealed offset index missing": drop(lambda b: b[0], ".index"),
    "sealed time index missing": drop(lambda b: b[0], ".timeindex"),
    "partial entry in a sealed index": partial_index_entry,
    "active index points past the log": active_index_past_the_log,
    "active time index past the log": active_time_index_past_the_log,
    "active index not rising": active_index_not_rising,
    "active log of an old magic": active_log_old_magic,
    "a deletion pending": pending_deletion,
    "an index without its log": orphan_index,
    "a snapshot of no segment": stray_snapshot,
    "a transaction index": empty_txn_index,
    "a file of another kind": unknown_file,
}


@pytest.mark.parametrize("time_edges", [False, True])
@pytest.mark.parametrize("max_read", [prescan.MAX_READ_BYTES, 16, 0])
@pytest.mark.parametrize("damage", DAMAGE)
def test_a_clean_load_from_a_scan_is_the_load_without_it(
    tmp_path: Path, clock: ManualClock, damage: str, max_read: int, time_edges: bool
) -> None:
    """Two copies of one dir, damaged alike, loaded after a clean shutdown: one from its scan, one with the
    loader's own calls. Same log, same records, same largest timestamps, same files left (what a recovery
    or rebuild wrote too); ``max_read`` below a file's size leaves that file for the loader to read;
    ``time_edges``: the scan an inspection makes, with the sealed segments' time-index edges."""
    source = tmp_path / "source" / "topic-0"
    source.mkdir(parents=True)
    fill(source, clock)
    DAMAGE[damage](source)
    results, files = [], []
    for name, use_scan in (("plain", False), ("scanned", True)):
        directory = tmp_path / name / "topic-0"
        shutil.copytree(source, directory)
        scan = scan_of(directory, max_read, time_edges=time_edges) if use_scan else None
        result = load_partition_log(
            directory, CONFIG, clock=clock, clean_shutdown=True, recovery_point=COUNT, scan=scan
        )
        results.append(fingerprint(result))
        result.log.close()
        files.append(files_of(directory))
    assert results[0] == results[1]
    assert files[0] == files[1]


@pytest.mark.parametrize("regular", [True, False])
def test_the_scan_is_what_the_loader_would_read(tmp_path: Path, clock: ManualClock, regular: bool) -> None:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    if not regular:
        unknown_file(directory)
    scan = scan_of(directory)
    log_bases = bases(directory)
    if regular:
        assert scan.shape is not None and scan.sizes is None
        assert list(scan.shape.log_bases) == log_bases
        for suffix, sizes in [
            (".log", scan.shape.log_sizes),
            (".index", scan.shape.index_sizes),
            (".timeindex", scan.shape.time_index_sizes),
        ]:
            assert list(sizes) == [seg(directory, base, suffix).stat().st_size for base in log_bases]
        assert sorted(scan.shape.other_names) == sorted(
            n for n in os.listdir(directory) if not n[0].isdigit()
        )
    else:
        assert scan.shape is None and scan.sizes is not None
        assert sorted(scan.sizes) == sorted(os.listdir(directory))
        sized = (".log", ".index", ".timeindex")  # the sizes the loader uses: no other file is stat'ed
        assert scan.sizes == {
            name: (directory / name).stat().st_size if name.endswith(sized) else -1 for name in scan.sizes
        }
    active = log_bases[-1]
    assert scan.active_stem == f"{active:020d}"
    assert scan.offset_index == seg(directory, active, ".index").read_bytes()
    assert scan.time_index == seg(directory, active, ".timeindex").read_bytes()
    index = scan.offset_index
    last_position = int.from_bytes(index[-4:], "big") if index else 0
    assert scan.log_position == last_position
    assert scan.log_tail == seg(directory, active, ".log").read_bytes()[last_position:]


_EXTENSIONS = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_shape_is_what_sorting_out_the_names_finds(
    tmp_path: Path, clock: ManualClock, damage: str
) -> None:
    """A scan's shape, when it has one, is what the loader finds in the names itself; a name it would not
    sort out the usual way, or an index without its log, leaves none."""
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    DAMAGE[damage](directory)
    shape = scan_of(directory).shape
    names = os.listdir(directory)
    regular = all(
        name in ("leader-epoch-checkpoint", "partition.metadata")
        or (name[:20].isdigit() and name[20:] in _EXTENSIONS)
        for name in names
    ) and all(seg(directory, int(n[:20]), ".log").exists() for n in names if "index" in n)
    if not regular:
        assert shape is None
        return
    assert shape is not None
    log_bases, txn_bases = _sort_out_names(directory, names, read_only=True)
    assert (list(shape.log_bases), set(shape.txn_index_bases), list(shape.snapshot_offsets)) == (
        log_bases,
        txn_bases,
        list_snapshot_offsets(directory, names),
    )


@pytest.mark.parametrize("damage", ["healthy", "sealed time index missing", "a transaction index"])
def test_time_edges_are_each_sealed_time_index_first_and_last_entries(
    tmp_path: Path, clock: ManualClock, damage: str
) -> None:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    DAMAGE[damage](directory)
    seg(directory, bases(directory)[1], ".timeindex").write_bytes(bytes(range(36)))  # three entries
    seg(directory, bases(directory)[2], ".timeindex").write_bytes(b"")
    seg(directory, bases(directory)[3], ".timeindex").write_bytes(bytes(13))  # a partial entry
    shape = scan_of(directory, time_edges=True).shape
    assert shape is not None and shape.time_index_edges is not None
    expected: list[bytes | None] = []
    for base in bases(directory)[:-1]:
        path = seg(directory, base, ".timeindex")
        data = path.read_bytes() if path.exists() else None
        if data is None or len(data) % 12:
            expected.append(None)
        else:
            expected.append(data if len(data) <= 24 else data[:12] + data[-12:])
    assert list(shape.time_index_edges) == [*expected, None]
    assert expected[1] == bytes(range(12)) + bytes(range(24, 36))
    assert expected[2] == b""
    assert scan_of(directory).shape == shape._replace(time_index_edges=None)


def test_an_inspection_scan_reads_no_time_index_for_the_largest_timestamps(
    tmp_path: Path, clock: ManualClock
) -> None:
    """What retention asks of every sealed segment (its largest timestamp, checked) comes with the scan."""
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    plain = load_partition_log(directory, CONFIG, clock=clock, clean_shutdown=True, recovery_point=COUNT)
    expected = [s.largest_timestamp() for s in plain.log.segments]
    plain.log.close()
    scan = scan_of(directory, time_edges=True)
    opened: list[str] = []
    _RECORDING.append(opened)
    try:
        log = load_partition_log(
            directory,
            CONFIG,
            clock=clock,
            clean_shutdown=True,
            recovery_point=COUNT,
            scan=scan,
            read_only=True,
        ).log
        largest = [s.largest_timestamp() for s in log.segments]
    finally:
        _RECORDING.pop()
    assert largest == expected
    segments = log.segments  # record i has timestamp 1000 + i: a segment's largest is its last record's
    assert [t for t, _ in largest[:-1]] == [1000 + later.base_offset - 1 for later in segments[1:]]
    assert opened == []
    log.abandon()


def test_scanned_time_index_edges_out_of_order_fail_as_the_file_does(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A sealed time index whose last timestamp is below its first: its largest timestamp raises the same
    error whether the edges came with the scan or from the file."""
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    sealed = seg(directory, bases(directory)[0], ".timeindex")
    sealed.write_bytes(
        (2000).to_bytes(8, "big") + bytes(4) + (1000).to_bytes(8, "big") + (1).to_bytes(4, "big")
    )
    errors = []
    for scan in (None, scan_of(directory, time_edges=True)):
        log = load_partition_log(
            directory,
            CONFIG,
            clock=clock,
            clean_shutdown=True,
            recovery_point=COUNT,
            scan=scan,
            read_only=True,
        ).log
        with pytest.raises(CorruptDataError) as raised:
            log.segments[0].largest_timestamp()
        errors.append(str(raised.value))
        log.abandon()
    assert errors[0] == errors[1]
    assert "below the first timestamp" in errors[0]


def test_a_scanned_clean_load_opens_no_file(tmp_path: Path, clock: ManualClock) -> None:
    """Every call the clean load would make came with the scan (the loader did not silently fall back), and
    the active segment's checks were made in C (its end offset came with the scan)."""
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    scan = scan_of(directory)
    assert scan.next_offset == COUNT
    opened: list[str] = []
    _RECORDING.append(opened)
    try:
        log = load_partition_log(
            directory, CONFIG, clock=clock, clean_shutdown=True, recovery_point=COUNT, scan=scan
        ).log
    finally:
        _RECORDING.pop()
    assert opened == []
    assert log.log_end_offset == COUNT
    log.close()


@pytest.mark.parametrize("damage", ["healthy", "a transaction index", "a snapshot of no segment"])
def test_a_scan_checked_in_c_loads_without_the_steps(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A clean dir whose scan passed its checks in C is loaded from the scan alone: the steps' own calls
    (``_load_by_steps``) are not made, a sealed segment's transaction index is still checked."""
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    DAMAGE[damage](directory)

    def steps(*args: object, **kwargs: object) -> None:
        raise AssertionError("the general path ran")

    monkeypatch.setattr(loader, "_load_by_steps", steps)
    log = load_partition_log(
        directory, CONFIG, clock=clock, clean_shutdown=True, recovery_point=COUNT, scan=scan_of(directory)
    ).log
    assert log.log_end_offset == COUNT
    assert [r.offset for r in log.read(0, max_records=10_000)] == list(range(COUNT))
    log.close()


def test_a_scan_whose_sealed_index_fails_goes_by_the_steps(tmp_path: Path, clock: ManualClock) -> None:
    """A sealed index with a partial entry fails the fast path's check: the steps rebuild it, as they
    would without a scan (the same load, ``test_a_clean_load_from_a_scan_is_the_load_without_it``)."""
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    partial_index_entry(directory)
    scan = scan_of(directory)
    assert segments_checked_in_c(directory, scan, CONFIG, clock, f"{directory}/") is None
    result = load_partition_log(
        directory, CONFIG, clock=clock, clean_shutdown=True, recovery_point=COUNT, scan=scan
    )
    assert result.recovered_segments == 1
    result.log.close()


_RECORDING: list[list[str]] = []


def _record(event: str, args: tuple[object, ...]) -> None:
    if _RECORDING and event in ("open", "os.listdir", "os.scandir"):
        _RECORDING[-1].append(f"{event} {args[0]!r}")


sys.addaudithook(_record)  # process-wide and permanent: it records only while a list is pushed


def test_the_scan_is_ignored_after_an_unclean_shutdown(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    scan = scan_of(directory)
    truncate_active_log(directory)  # after the scan: only a load that reads the files itself sees it
    result = load_partition_log(directory, CONFIG, clock=clock, recovery_point=0, scan=scan)
    assert result.truncated_bytes > 0
    result.log.close()


def test_prescan_hands_each_dir_over_once_in_order(tmp_path: Path, clock: ManualClock) -> None:
    names = [f"t-{i}" for i in range(7)]
    for name in names:
        (tmp_path / name).mkdir()
        fill(tmp_path / name, clock, count=3)
    shutil.rmtree(tmp_path / "t-2")
    scanner = LogDirPrescan(tmp_path, [*names, "not-there"], first_chunk_partitions=1, chunk_partitions=2)
    scanner.start()  # chunks: t-0 | t-1 t-2 | t-3 t-4 | t-5 t-6 | not-there
    scanner._thread.join(timeout=30)  # every chunk scanned (a chunk not begun is not waited for: below)
    try:
        assert scanner.take("t-0") is not None
        assert scanner.take("t-0") is None  # handed over once
        assert scanner.take("t-2") is None  # gone: no dir to scan
        assert scanner.take("elsewhere") is None
        scanned = scanner.take("t-5")
        assert scanned is not None and scanned.shape is not None
        assert list(scanned.shape.log_bases) == bases(tmp_path / "t-5")
        assert scanner.take("t-3") is None  # its chunk was dropped once a later one was asked for
    finally:
        scanner.close()
    assert scanner.take("t-6") is None  # closed: no wait


def _clean_dir(root: Path, clock: ManualClock, partitions: int) -> Path:
    log_dir = root / "logs"
    for i in range(partitions):
        (log_dir / f"t-{i}").mkdir(parents=True)
        fill(log_dir / f"t-{i}", clock, count=3)
    manager = LogManager([log_dir], lambda topic: CONFIG, clock=clock, scheduler=DeferredTasks())
    manager.startup()
    manager.shutdown()  # the checkpoints, the marker and the lock file, as a clean stop leaves them
    return log_dir


def test_early_prescans_lock_the_dir_and_the_log_manager_takes_over(
    tmp_path: Path, clock: ManualClock
) -> None:
    log_dir = _clean_dir(tmp_path, clock, partitions=5)
    early = start_early_prescans([log_dir])
    try:
        with pytest.raises(ConflictError):
            LogDirLock(log_dir).acquire()
        manager = LogManager([log_dir], lambda _: CONFIG, clock=clock, scheduler=DeferredTasks())
        manager.startup(prescans=early)
        assert early.take(log_dir) is None  # taken over
        assert len(manager.logs) == 5
        assert all(log.log_end_offset == 3 for log in manager.logs.values())
        manager.shutdown()
    finally:
        early.close()
    with LogDirLock(log_dir):  # released with the manager's stop
        pass


def test_early_prescans_read_the_topic_ids_the_stray_survey_reads(tmp_path: Path, clock: ManualClock) -> None:
    """The ``partition.metadata`` files are read beside the imports; the survey judges by the same ids, and
    each log keeps the id that was read for it."""
    log_dir = _clean_dir(tmp_path, clock, partitions=3)
    write_partition_metadata(log_dir / "t-1", "BBBBBBBBBBBBBBBBBBBBBB")
    early = start_early_prescans([log_dir])
    try:
        files = early.partition_metadata(log_dir)
        assert files is not None and files["t-1"] == (log_dir / "t-1" / PARTITION_METADATA_FILE).read_bytes()
        assert files[".lock"] is None, "not a partition dir: nothing read"
        assert [r.topic_id for r in survey_replica_dirs([log_dir], early.partition_metadata)] == [
            r.topic_id for r in survey_replica_dirs([log_dir])
        ]
        manager = LogManager([log_dir], lambda _: CONFIG, clock=clock, scheduler=DeferredTasks())
        manager.startup(prescans=early)
        assert manager.logs[TopicPartition("t", 1)].topic_id == "BBBBBBBBBBBBBBBBBBBBBB"
        manager.shutdown()
    finally:
        early.close()


def test_early_prescans_leave_an_unclean_dir_and_release_what_was_not_taken(
    tmp_path: Path, clock: ManualClock
) -> None:
    log_dir = _clean_dir(tmp_path, clock, partitions=2)
    other = tmp_path / "other"
    shutil.copytree(log_dir, other)
    (other / ".kafka_cleanshutdown").unlink()
    early = start_early_prescans([log_dir, other, tmp_path / "missing"])
    assert early.take(other) is None and early.take(tmp_path / "missing") is None
    with pytest.raises(ConflictError):
        LogDirLock(log_dir).acquire()
    early.close()  # a start-up that failed before the logs loaded
    with LogDirLock(log_dir):
        pass
    write_clean_shutdown_marker(other)


def test_pure_python_turns_the_scan_off() -> None:
    code = "from service.storage.prescan import has_dirscan; print(has_dirscan())"
    for env, expected in [({}, "True"), ({"LOGCLEANER_PURE_PYTHON": "1"}, "False")]:
        out = subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True
        )
        assert (out.returncode, out.stdout.strip()) == (0, expected)


def test_a_loader_ahead_of_the_scan_does_not_wait_for_it(tmp_path: Path, clock: ManualClock) -> None:
    """A chunk the thread has not begun (here: a thread that never runs, as one starved of CPU) is not
    waited for: the loader makes its own calls for it."""
    (tmp_path / "t-0").mkdir()
    fill(tmp_path / "t-0", clock, count=3)
    scanner = LogDirPrescan(tmp_path, ["t-0"])  # not started
    assert scanner.take("t-0") is None


def test_a_listing_longer_than_one_read_is_whole(tmp_path: Path, clock: ManualClock) -> None:
    """More names than one ``getdents64`` call returns (32 KiB of entries): every one is listed."""
    directory = tmp_path / "topic-0"
    directory.mkdir()
    fill(directory, clock)
    for n in range(1500):
        (directory / f"notes-{n:04d}-{'x' * 40}.txt").write_bytes(b"")
    scan = scan_of(directory)
    assert scan.sizes is not None
    assert sorted(scan.sizes) == sorted(os.listdir(directory))

"""The key map bounded by the thread's share of the dedupe buffer (``key_map_budget.py``, ``native/spill.c``):
a round over more keys than the share holds spills, still cleans the whole dirty section, and writes the
same bytes as an unbounded round; its peak RSS stays near the share; a kill mid-spill leaves nothing that a
restart misreads."""

from __future__ import annotations

import errno
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import cleaner.compaction.offset_map as offset_map_module
from cleaner.compaction.cleaner import Cleaner
from cleaner.compaction.key_map_budget import KeyMapBudget, remove_spill_leftovers
from cleaner.engine import InProcessEngine
from cleaner.native import has_native
from service.base.clock import ManualClock
from service.base.errors import InvalidInputError
from service.config.broker_config import BrokerConfig
from service.shell.node import build_engine
from service.storage.loader import load_partition_log
from tests.cleaner.bounded_round_process import NOW_MS, run_bounded_round
from tests.cleaner.budget_logs import (
    SEGMENT_BYTES,
    TINY_SHARE,
    budget_config,
    generate_rolled,
    plain_log,
    transactional_log,
)
from tests.cleaner.helpers import compact_config, keyed, new_log

pytestmark = pytest.mark.skipif(not has_native(), reason="the bound is the C key map's")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plain_log(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def transactional(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return transactional_log(tmp_path_factory.mktemp("txn"))


def _copy(source: Path, root: Path) -> Path:
    target = root / source.name
    shutil.copytree(source, target)
    return target


def _clean(directory: Path, first_dirty: int, budget: KeyMapBudget | None) -> tuple[int, int]:
    """The round's end offset and the classes its key map spilled to."""
    clock = ManualClock(NOW_MS)
    log = load_partition_log(directory, budget_config(), clock=clock).log

    def delete_now(_delay_ms: int, delete: Callable[[], None]) -> None:
        delete()

    try:
        cleaner = Cleaner(clock=clock, schedule_delete=delete_now, key_map_budget=budget)
        result = cleaner.clean(log, first_dirty, log.active_segment.base_offset)
        return result.end_offset, result.stats.spill_classes
    finally:
        log.close()


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _assert_same_round(
    source: Path, tmp_path: Path, first_dirty: int, caplog: pytest.LogCaptureFixture, budget: KeyMapBudget
) -> None:
    unbounded = _copy(source, tmp_path / "unbounded")
    bounded = _copy(source, tmp_path / "bounded")
    expected_end, unbounded_classes = _clean(unbounded, first_dirty, None)
    assert unbounded_classes == 0
    with caplog.at_level(logging.INFO, logger="cleaner.compaction.cleaner"):
        end, classes = _clean(bounded, first_dirty, budget)
    assert end == expected_end
    assert classes > 0 and "spilled to" in caplog.text  # the round did pass the share, and says so
    assert _files(bounded) == _files(unbounded)


@pytest.mark.parametrize("first_dirty", [0, 25_000])
def test_a_spilled_round_writes_the_bytes_of_an_unbounded_one(
    plain: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, first_dirty: int
) -> None:
    """From offset 0 (every record dirty) and from the middle (the records below it probed)."""
    _assert_same_round(plain, tmp_path, first_dirty, caplog, KeyMapBudget(TINY_SHARE))


@pytest.mark.parametrize("first_dirty", [0, 17_000])
def test_a_spilled_round_over_transactions_and_lz4_writes_the_same_bytes(
    transactional: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, first_dirty: int
) -> None:
    _assert_same_round(transactional, tmp_path, first_dirty, caplog, KeyMapBudget(TINY_SHARE))


def test_a_spill_dir_of_its_own_gives_the_same_bytes(
    plain: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    _assert_same_round(plain, tmp_path, 0, caplog, KeyMapBudget(TINY_SHARE, spill_dir))
    assert list(spill_dir.iterdir()) == []


def test_a_share_the_round_fits_in_does_not_spill(
    plain: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bounded = _copy(plain, tmp_path)
    with caplog.at_level(logging.INFO, logger="cleaner.compaction.cleaner"):
        _, classes = _clean(bounded, 0, KeyMapBudget(256 << 20))
    assert classes == 0 and "spilled" not in caplog.text


def test_kafkas_share_is_the_buffer_over_the_threads() -> None:
    assert KeyMapBudget.of(128 << 20, 4).share_bytes == 32 << 20
    assert KeyMapBudget.of(128 << 20, 0).share_bytes == 128 << 20  # no thread: the pool never cleans


def test_peak_rss_stays_near_the_share_on_a_many_key_partition(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """~330,000 keys: an unbounded map takes about 32 MiB more than the loaded log; a 12 MiB share holds
    the round within the share and a few MiB of buffers."""
    source = generate_rolled(tmp_path_factory.mktemp("many"), records=400_000, keys=1_000_000, value_size=10)
    peaks = {}
    for name, share in (("unbounded", None), ("bounded", 12 << 20)):
        directory = _copy(source, tmp_path_factory.mktemp(name))
        spec = {
            "directory": str(directory),
            "segment_bytes": SEGMENT_BYTES,
            "first_dirty": 0,
            "share_bytes": share,
        }
        done = run_bounded_round(spec)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        peaks[name] = (out["rss_peak_kib"] - out["rss_before_kib"]) / 1024
    assert peaks["unbounded"] >= 28, peaks  # the shape does need more than the share
    assert peaks["bounded"] <= 12 + 8, peaks


def test_a_kill_mid_spill_leaves_a_log_that_restarts_and_cleans_the_same(plain: Path, tmp_path: Path) -> None:
    reference = _copy(plain, tmp_path / "reference")
    _clean(reference, 0, None)
    killed = _copy(plain, tmp_path / "killed")
    before = sorted(p.name for p in killed.iterdir())
    spec = {
        "directory": str(killed),
        "segment_bytes": SEGMENT_BYTES,
        "first_dirty": 0,
        "share_bytes": TINY_SHARE,
        "kill_in_spill": True,
    }
    done = run_bounded_round(spec)
    assert done.returncode == -9, done.stderr  # SIGKILL, with the classes on disk
    assert sorted(p.name for p in killed.iterdir()) == before  # nameless spill files: nothing left
    _clean(killed, 0, KeyMapBudget(TINY_SHARE))
    assert _files(killed) == _files(reference)


def test_named_spill_leftovers_are_removed_at_start(plain: Path, tmp_path: Path) -> None:
    """Where ``O_TMPFILE`` is refused the class files are named ``….keymap-spill-<pid>-<k>.deleted`` until
    unlinked: the partition's loader deletes them as any ``.deleted`` file, the engine those of its spill
    dir when it is built."""
    directory = _copy(plain, tmp_path / "log")
    (directory / "00000000000000000000.keymap-spill-7-0.deleted").write_bytes(b"x" * 100)
    load_partition_log(directory, budget_config(), clock=ManualClock(NOW_MS)).log.close()
    assert not list(directory.glob("*.keymap-spill-*"))
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    (spill_dir / "00000000000000000000.keymap-spill-7-3.deleted").write_bytes(b"x")
    (spill_dir / "unrelated.txt").write_bytes(b"kept")
    InProcessEngine(ManualClock(NOW_MS), key_map_budget=KeyMapBudget(TINY_SHARE, spill_dir))
    assert [p.name for p in spill_dir.iterdir()] == ["unrelated.txt"]
    assert remove_spill_leftovers(tmp_path / "absent") == 0


def test_the_daemons_engine_takes_each_threads_share_and_the_spill_dir(tmp_path: Path) -> None:
    props = {
        "log.dirs": str(tmp_path / "logs"),
        "log.cleaner.threads": "4",
        "log.cleaner.dedupe.buffer.size": str(256 << 20),
        "log.cleaner.spill.dir": str(tmp_path / "spill"),
    }
    broker, _warnings = BrokerConfig.from_properties(props)
    with pytest.raises(InvalidInputError, match=r"log.cleaner.spill.dir=.* is not a directory: create it"):
        build_engine(broker, ManualClock(NOW_MS))
    (tmp_path / "spill").mkdir()
    engine = build_engine(broker, ManualClock(NOW_MS))
    assert isinstance(engine.in_process, InProcessEngine)
    assert engine.in_process.key_map_budget == KeyMapBudget(64 << 20, tmp_path / "spill")
    unset, _warnings = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "logs")})
    in_process = build_engine(unset, ManualClock(NOW_MS)).in_process
    assert isinstance(in_process, InProcessEngine)
    assert in_process.key_map_budget == KeyMapBudget(128 << 20, None)  # Kafka's default, one thread


@dataclass(frozen=True, slots=True)
class NoTable(KeyMapBudget):
    """No room for a table: every put spills (``native/spill.c``: a budget of 0)."""

    def table_bytes(self, first_offset: int, end: int) -> int:
        return 0


def test_keys_larger_than_a_class_buffer_spill_and_clean_the_same(tmp_path: Path) -> None:
    """A 40 KiB key is written to its class file on its own, past the 32 KiB buffer."""
    directory = tmp_path / "memory" / "topic-0"
    log = new_log(directory, ManualClock(NOW_MS), segment_bytes=1 << 20, segment_index_bytes=1 << 20)
    for i in range(60):
        key = (b"%02d" % (i % 7)) * 20_000 if i % 3 else b"short-%d" % (i % 5)
        log.append_records([keyed(key, b"v%d" % i)])
        if i % 20 == 19:
            log.roll()
    log.roll()
    log.close()
    shutil.copytree(directory.parent, tmp_path / "spilled")
    assert _clean_at(directory, 10, None) == _clean_at(tmp_path / "spilled" / "topic-0", 10, NoTable(0))
    assert _files(tmp_path / "spilled" / "topic-0") == _files(directory)


def _clean_at(directory: Path, first_dirty: int, budget: KeyMapBudget | None) -> int:
    clock = ManualClock(NOW_MS)
    log = load_partition_log(
        directory, compact_config(segment_bytes=1 << 20, segment_index_bytes=1 << 20), clock=clock
    ).log
    try:
        cleaner = Cleaner(clock=clock, schedule_delete=lambda _delay, delete: delete(), key_map_budget=budget)
        return cleaner.clean(log, first_dirty, log.active_segment.base_offset).end_offset
    finally:
        log.close()


def test_a_spill_that_fails_rebuilds_the_map_in_memory_and_cleans_the_same(
    plain: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spill file that fails (here: a full disk at the replay) costs the bound, never the round."""

    def full_disk(_key_map: object, _first_offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    reference = _copy(plain, tmp_path / "reference")
    expected_end, _ = _clean(reference, 0, None)
    monkeypatch.setattr(offset_map_module, "finish_spill", full_disk)
    failed = _copy(plain, tmp_path / "failed")
    with caplog.at_level(logging.WARNING, logger="cleaner.compaction.offset_map"):
        assert _clean(failed, 0, KeyMapBudget(TINY_SHARE))[0] == expected_end
    assert "building it again in memory, unbounded" in caplog.text
    assert _files(failed) == _files(reference)

"""The descriptor budget: a segment holds at most its ``.log`` descriptor, and only while it is active or
read. Each test runs a path over more segments than its descriptor limit allows (``fd_limit``), so a leak
of one descriptor per segment fails it with EMFILE, and checks the count is back where it started."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.shell.cli import main
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.descriptor_helpers import (
    HEADROOM_FDS,
    NOW_MS,
    SEGMENTS_PER_PARTITION,
    fd_limit,
    make_unclean,
    many_segments,
    open_fds,
)

SMALL_SEGMENTS = LogConfig(segment_bytes=1300)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return many_segments(tmp_path_factory.mktemp("generated") / "logs")


@pytest.fixture
def log_dir(generated: Path, tmp_path: Path) -> Path:
    """A fresh copy of the generated dir: 4 partitions of 50 one-batch segments, cleanly closed."""
    return Path(shutil.copytree(generated, tmp_path / "logs"))


def test_the_copy_has_more_segments_than_the_limit_allows(log_dir: Path) -> None:
    assert len(list(log_dir.glob("*/*.log"))) == 4 * SEGMENTS_PER_PARTITION > 3 * HEADROOM_FDS


def test_appends_that_roll_keep_one_descriptor_per_active_segment(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    clock = ManualClock(NOW_MS)
    loaded = load_log_dir(tmp_path, lambda _topic: SMALL_SEGMENTS, clock=clock)
    log = loaded.logs[TopicPartition("t", 0)]
    start = open_fds()
    with fd_limit():
        for n in range(300):
            log.append_records([Record(0, NOW_MS, f"k{n}".encode(), b"v" * 1000)])
            assert open_fds() <= start + 1  # the active segment's .log, nothing per sealed segment
    assert len(log.segments) == 300
    close_log_dir(loaded)
    assert open_fds() == start


def test_closing_a_log_leaves_its_rolled_segments_indexes_unread(tmp_path: Path) -> None:
    """A rolled segment was left final (trimmed, last time-index entry written): closing does not read it
    again. A partial entry appended behind our back would fail any load, so the close shows none."""
    (tmp_path / "t-0").mkdir()
    loaded = load_log_dir(tmp_path, lambda _topic: SMALL_SEGMENTS, clock=ManualClock(NOW_MS))
    log = loaded.logs[TopicPartition("t", 0)]
    for n in range(3):
        log.append_records([Record(0, NOW_MS + n, b"k", b"v" * 1000)])
    sealed = log.segments[0]
    assert not sealed.offset_index.is_loaded and not sealed.time_index.is_loaded
    time_index_path = sealed.time_index.path
    for index in (sealed.offset_index, sealed.time_index):
        with index.path.open("ab") as f:
            f.write(b"\x00")
    close_log_dir(loaded)
    assert time_index_path.stat().st_size % 12 == 1  # untouched (a closed segment refuses index access)


def test_an_unclean_load_recovers_every_segment_without_keeping_their_descriptors(log_dir: Path) -> None:
    make_unclean(log_dir)
    start = open_fds()
    with fd_limit():
        loaded = load_log_dir(log_dir, lambda _topic: SMALL_SEGMENTS, clock=ManualClock(NOW_MS))
        assert loaded.recovered_segments == 4 * SEGMENTS_PER_PARTITION
        assert open_fds() == start  # recovered segments are left as a clean load leaves them
        close_log_dir(loaded)  # fsyncs what recovery wrote, through descriptors opened for it
    assert open_fds() == start
    assert read_clean_shutdown_marker(log_dir) is not None


def test_fetch_across_sealed_segments_gives_back_every_descriptor(log_dir: Path) -> None:
    loaded = load_log_dir(log_dir, lambda _topic: SMALL_SEGMENTS, clock=ManualClock(NOW_MS))
    log = loaded.logs[TopicPartition("fds", 0)]
    start = open_fds()
    with fd_limit():
        for _ in range(3):
            assert len(log.read(0, max_records=100_000)) == 10 * SEGMENTS_PER_PARTITION
        assert len(log.read(15, max_records=3)) == 3  # a read that stops early closes its file too
        reader = log.read_batches(0)
        next(reader)
        assert open_fds() == start + 1  # the read in flight
        del reader
        for segment in log.segments:  # what views and retention read: the first batch, the timestamps
            segment.largest_timestamp()
            segment.first_batch_timestamp()
    assert open_fds() == start
    close_log_dir(loaded)


COMPACT_IN_PROCESS = (
    "--override",
    "log.cleanup.policy=compact",
    "--override",
    "log.cleaner.engine=in-process",
)


@pytest.mark.parametrize(
    ("command", "listed", "count"),
    [
        (["explain", "--json"], "partitions", 4),
        (["retention", "--dry-run", "--json"], "deleted", 4 * SEGMENTS_PER_PARTITION),  # all expired
        (["retention", "--json"], "deleted", 4 * SEGMENTS_PER_PARTITION),
        (["clean", *COMPACT_IN_PROCESS, "--json"], "cleaned", 4),
    ],
    ids=["explain", "retention-dry-run", "retention", "clean"],
)
@pytest.mark.parametrize("unclean", [False, True], ids=["clean", "unclean"])
def test_offline_read_commands_run_under_a_low_limit(
    log_dir: Path,
    command: list[str],
    listed: str,
    count: int,
    unclean: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if unclean:
        make_unclean(log_dir)
    start = open_fds()
    with fd_limit():
        code = main([command[0], "--override", f"log.dirs={log_dir}", *command[1:]])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(json.loads(out)[listed]) == count
    assert open_fds() == start
    changes_the_logs = command[0] in {"retention", "clean"} and "--dry-run" not in command
    had_marker = not unclean
    # A command that changes the logs closes them cleanly; an inspection writes nothing, marker included.
    assert (read_clean_shutdown_marker(log_dir) is not None) == (changes_the_logs or had_marker)


def test_dump_of_every_file_of_a_dir_under_a_low_limit(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(str(p) for p in log_dir.glob("fds-*/*") if p.suffix in (".log", ".index", ".timeindex"))
    assert len(files) > 3 * HEADROOM_FDS
    start = open_fds()
    with fd_limit():
        code = main(["dump", "--json", *files])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(json.loads(out)["files"]) == len(files)
    assert open_fds() == start


def _limit_to_2048() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (2048, 2048))


@pytest.mark.slow
def test_gen_of_5000_segments_then_an_unclean_load_under_ulimit_2048(tmp_path: Path) -> None:
    """The issue's case: ``gen`` of 5,000 segments in 100 partitions, then a LogManager load that recovers
    every one of them (offline ``retention``), each a subprocess with ``ulimit -n 2048``."""
    log_dir = tmp_path / "logs"
    gen = [
        *("gen", "--log-dir", str(log_dir), "--partitions", "100", "--records", "500"),
        *("--batch-size", "10", "--segment-bytes", "1300", "--json"),
    ]
    done = _run_limited(gen)
    assert sum(p["segments"] for p in json.loads(done.stdout)["topics"]) == 5000
    make_unclean(log_dir)
    # retention loads the real dir (an inspection would load a read-only copy): recovery happens in place
    done = _run_limited(["-v", "retention", "--override", f"log.dirs={log_dir}", "--json"])
    assert json.loads(done.stdout)["deleted"] == []
    assert done.stderr.count("Recovering unflushed segment") == 5000
    assert read_clean_shutdown_marker(log_dir) is not None


def _run_limited(args: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "service", *args],
        preexec_fn=_limit_to_2048,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done

"""``logcleaner clean``: offline compaction of every cleanable partition or the one named,
its JSON document, the cleaner-offset-checkpoint it writes, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.shell.cli import main
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_config import LogConfig
from service.storage.log_dir import load_log_dir
from service.storage.topic_partition import TopicPartition

ENGINE = ("--override", "log.cleaner.engine=in-process")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def generate(capsys: pytest.CaptureFixture[str], log_dir: Path, *extra: str) -> None:
    code, _, err = run(
        capsys,
        "gen",
        "--log-dir",
        str(log_dir),
        "--records",
        "3000",
        "--keys",
        "200",
        "--batch-size",
        "50",
        "--value-size",
        "20",
        "--tombstones",
        "0.05",
        "--segment-bytes",
        "16384",
        *extra,
    )
    assert code == 0, err


def options(log_dir: Path, *extra: str) -> list[str]:
    return ["--override", f"log.dirs={log_dir}", "--override", "log.cleanup.policy=compact", *ENGINE, *extra]


def keys_per_partition(log_dir: Path) -> dict[TopicPartition, list[bytes]]:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=SystemClock())
    try:
        return {
            tp: [r.key or b"" for r in log.read(0, max_records=1_000_000)] for tp, log in loaded.logs.items()
        }
    finally:
        for log in loaded.logs.values():
            log.close()


def test_cleans_every_cleanable_partition_and_writes_the_checkpoint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    generate(capsys, tmp_path, "--partitions", "2")
    before = keys_per_partition(tmp_path)
    code, out, err = run(capsys, "clean", *options(tmp_path), "--json")
    assert code == 0, err
    cleaned = json.loads(out)["cleaned"]
    assert sorted((c["topic"], c["partition"]) for c in cleaned) == [("gen-0", 0), ("gen-0", 1)]
    checkpoints = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint").read()
    after = keys_per_partition(tmp_path)
    for doc in cleaned:
        tp = TopicPartition(doc["topic"], doc["partition"])
        assert doc["first_dirty_offset"] == 0 and checkpoints[tp] == doc["end_offset"] > 0
        stats = doc["stats"]
        assert stats["records_read"] > stats["records_retained"] > 0
        assert stats["bytes_read"] > stats["bytes_written"] > 0
        assert {"elapsed_ms", "map_build_ms", "rewrite_ms", "mb_per_s"} <= stats.keys()
        assert len(after[tp]) < len(before[tp])
        assert set(after[tp]) <= set(before[tp])
    # a second run finds nothing left to clean
    code, out, _ = run(capsys, "clean", *options(tmp_path), "--json")
    assert code == 0 and json.loads(out) == {"cleaned": []}


def test_the_named_partition_is_cleaned_whatever_its_dirty_ratio(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    generate(capsys, tmp_path, "--partitions", "2")
    high_ratio = ("--override", "log.cleaner.min.cleanable.ratio=1")  # never strictly above
    code, out, _ = run(capsys, "clean", *options(tmp_path, *high_ratio), "--json")
    assert code == 0 and json.loads(out) == {"cleaned": []}, "the ratio keeps the loop away"
    code, out, err = run(
        capsys, "clean", *options(tmp_path, *high_ratio), "--topic", "gen-0", "--partition", "1"
    )
    assert code == 0, err
    assert out.startswith("cleaned gen-0-1 [0, ") and "1 partition cleaned" in out
    checkpoints = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint").read()
    assert list(checkpoints) == [TopicPartition("gen-0", 1)]


def state_of_the_log_dir(log_dir: Path) -> dict[str, tuple[bytes, int]]:
    """Each file at the log dir's top (the marker and the checkpoints): its bytes and modification time."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in log_dir.iterdir() if p.is_file()}


def test_nothing_compacted_says_so_and_leaves_every_file_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    generate(capsys, tmp_path, "--partitions", "1")
    before = state_of_the_log_dir(tmp_path)
    assert ".kafka_cleanshutdown" in before and "recovery-point-offset-checkpoint" in before
    code, out, err = run(capsys, "clean", "--override", f"log.dirs={tmp_path}", *ENGINE)
    assert code == 0, err
    assert out == "0 partitions cleaned: no partition has cleanup.policy=compact (files left untouched)\n"
    assert state_of_the_log_dir(tmp_path) == before


def test_nothing_dirty_enough_names_each_ratio_and_leaves_every_file_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    generate(capsys, tmp_path, "--partitions", "2")
    before = state_of_the_log_dir(tmp_path)
    high_ratio = ("--override", "log.cleaner.min.cleanable.ratio=1")
    code, out, err = run(capsys, "clean", *options(tmp_path, *high_ratio))
    assert code == 0, err
    first, second, summary = out.splitlines()
    assert first.startswith("not cleaned gen-0-0: dirty ratio 1.000 is not above min.cleanable.dirty.ratio=1")
    assert second.startswith("not cleaned gen-0-1: dirty ratio ")
    assert summary.startswith(
        "0 partitions cleaned: no compacted partition is dirty enough (files left untouched"
    )
    assert state_of_the_log_dir(tmp_path) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--topic", "gen-0"), "--topic and --partition go together"),
        (("--topic", "nope", "--partition", "0"), "nope-0"),
    ],
)
def test_bad_requests_exit_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    generate(capsys, tmp_path)
    code, out, err = run(capsys, "clean", *options(tmp_path), *args)
    assert code == 2 and out == ""
    assert message in err.strip().splitlines()[-1]


def test_a_partition_that_is_not_compacted_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    generate(capsys, tmp_path)
    code, _, err = run(
        capsys,
        "clean",
        "--override",
        f"log.dirs={tmp_path}",
        *ENGINE,
        "--topic",
        "gen-0",
        "--partition",
        "0",
    )
    assert code == 2 and "not compacted" in err

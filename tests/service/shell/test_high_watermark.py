"""The offline commands on a broker's dir whose high watermark (160) is below the log end (600).

Kafka's retention deletes no segment whose next base offset is above the high watermark
(``UnifiedLog.deletableSegments``), and its cleaner stops at the segment holding it
(``LogCleanerManager.cleanableOffsets``): of the expired segments 0, 150, 300 and 450 only 0 goes, and
only segment 0 is compacted. ``explain`` says why the rest stay.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.shell.cli import main
from service.storage.checkpoints import decode_checkpoint
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.topic_partition import TopicPartition
from tests.service.cli_logs import snapshot
from tests.service.high_watermark_helpers import (
    FUTURE,
    FUTURE_HIGH_WATERMARK,
    HIGH_WATERMARK,
    LOG_END,
    PER_SEGMENT,
    high_watermark_file,
    make_broker_dir,
    read_high_watermark_file,
)

T0 = TopicPartition("t", 0)
EXPIRED_BASES = [0, 150, 300, 450]


def run(
    capsys: pytest.CaptureFixture[str],
    log_dir: Path,
    *args: str,
    policy: str = "delete",
    engine: str = "in-process",
) -> tuple[int, str, str]:
    overrides = [f"log.dirs={log_dir}", "log.retention.hours=24", f"log.cleanup.policy={policy}"]
    overrides.append("unknown.topic.configs=broker-defaults")  # a ZooKeeper-era copy: the broker's policy
    overrides += [f"log.cleaner.engine={engine}", "spark.master=local[1]"]
    code = main([*args, *[arg for o in overrides for arg in ("--override", o)]])
    out, err = capsys.readouterr()
    return code, out, err


def explain_t0(
    capsys: pytest.CaptureFixture[str], log_dir: Path, policy: str = "delete"
) -> dict[str, object]:
    code, out, err = run(capsys, log_dir, "explain", "--json", policy=policy)
    assert code == 0, err
    [partition] = [p for p in json.loads(out)["partitions"] if (p["topic"], p["partition"]) == ("t", 0)]
    assert isinstance(partition, dict)
    return partition


def test_explain_keeps_the_expired_segments_above_the_high_watermark(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    partition = explain_t0(capsys, log_dir)
    assert (partition["high_watermark"], partition["log_end_offset"]) == (HIGH_WATERMARK, LOG_END)
    assert partition["high_watermark_source"] == "checkpoint"
    assert partition["last_stable_offset"] == HIGH_WATERMARK
    segments = partition["segments"]
    assert isinstance(segments, list)
    verdicts = [(s["base_offset"], s["verdict"], s["reason"]) for s in segments]
    assert verdicts[:4] == [
        (0, "delete", "time"),
        (150, "keep", "above-high-watermark"),
        (300, "keep", "above-high-watermark"),
        (450, "keep", "above-high-watermark"),
    ]
    assert segments[1]["detail"] == f"holds offsets up to 299, past the high watermark {HIGH_WATERMARK}"
    code, out, err = run(capsys, log_dir, "explain", policy="delete")
    assert code == 0, err
    assert f"offsets [0, {LOG_END}), high watermark {HIGH_WATERMARK} (checkpoint)," in out
    assert out.count(" above-high-watermark — holds offsets up to ") == 3, out


def test_retention_deletes_only_below_the_high_watermark_and_keeps_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    before = snapshot(log_dir)
    code, out, err = run(capsys, log_dir, "retention", "--dry-run", "--json")
    assert code == 0, err
    assert [(d["base_offset"], d["reason"]) for d in json.loads(out)["deleted"]] == [(0, "time")]
    assert snapshot(log_dir) == before, "a dry run writes nothing"
    code, out, err = run(capsys, log_dir, "retention", "--json")
    assert code == 0, err
    assert [d["base_offset"] for d in json.loads(out)["deleted"]] == [0]
    assert sorted(p.name for p in (log_dir / "t-0").glob("*.log")) == [
        f"{base:020d}.log" for base in [*EXPIRED_BASES[1:], LOG_END]
    ]
    assert read_high_watermark_file(log_dir) == {T0: HIGH_WATERMARK, FUTURE: FUTURE_HIGH_WATERMARK}
    code, out, err = run(capsys, log_dir, "retention", "--json")
    assert code == 0 and json.loads(out)["deleted"] == [], "the next pass deletes nothing more"


def test_a_partition_the_file_does_not_list_keeps_everything(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Kafka starts it at 0, raised to the log start offset: nothing was acknowledged, nothing goes."""
    log_dir = make_broker_dir(tmp_path / "logs", "t", high_watermark=None)
    partition = explain_t0(capsys, log_dir)
    assert (partition["high_watermark"], partition["high_watermark_source"]) == (0, "no-checkpoint")
    segments = partition["segments"]
    assert isinstance(segments, list)
    assert {s["reason"] for s in segments[:4]} == {"above-high-watermark"}
    code, out, err = run(capsys, log_dir, "retention", "--json")
    assert code == 0 and json.loads(out)["deleted"] == [], err
    assert read_high_watermark_file(log_dir) == {T0: 0, FUTURE: FUTURE_HIGH_WATERMARK}


def test_in_a_dir_logcleaner_made_every_partition_starts_at_its_log_end(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No broker's meta.properties: logcleaner is the only replica, the leader alone (Kafka's
    ``Partition.makeLeader``), whatever a stale checkpoint (or none) says."""
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    (log_dir / "meta.properties").unlink()
    for without_the_file in (False, True):
        if without_the_file:
            high_watermark_file(log_dir).unlink()
        partition = explain_t0(capsys, log_dir, policy="compact")
        assert (partition["high_watermark"], partition["high_watermark_source"]) == (
            LOG_END,
            "leader-log-end",
        )
        cleaner = partition["cleaner"]
        assert isinstance(cleaner, dict)
        assert (cleaner["first_uncleanable_offset"], cleaner["first_uncleanable_reason"]) == (
            LOG_END,
            "active-segment",
        )
        code, out, err = run(capsys, log_dir, "retention", "--dry-run", "--json")
        assert code == 0, err
        assert [d["base_offset"] for d in json.loads(out)["deleted"]] == EXPIRED_BASES


def test_a_brokers_dir_without_the_file_keeps_everything(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Who led is not known and nothing says what was acknowledged: Kafka's start at 0 (the log start)."""
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    high_watermark_file(log_dir).unlink()
    partition = explain_t0(capsys, log_dir)
    assert (partition["high_watermark"], partition["high_watermark_source"]) == (0, "no-checkpoint")
    code, out, err = run(capsys, log_dir, "retention", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["deleted"] == [], err


@pytest.mark.parametrize("engine", ["in-process", "spark"])
def test_the_cleaner_stops_at_the_segment_holding_the_high_watermark(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, engine: str
) -> None:
    """Both engines clean the range the cleaner manager plans (``service.core.cleanable``)."""
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    cleaner = explain_t0(capsys, log_dir, policy="compact")["cleaner"]
    assert isinstance(cleaner, dict)
    assert (cleaner["first_dirty_offset"], cleaner["first_uncleanable_offset"]) == (0, PER_SEGMENT)
    assert cleaner["first_uncleanable_reason"] == "above-high-watermark"
    code, out, err = run(
        capsys,
        log_dir,
        "clean",
        "--topic",
        "t",
        "--partition",
        "0",
        "--json",
        policy="compact",
        engine=engine,
    )
    assert code == 0, err
    [cleaned] = json.loads(out)["cleaned"]
    assert (cleaned["first_dirty_offset"], cleaned["end_offset"], cleaned["engine"]) == (
        0,
        PER_SEGMENT,
        engine,
    )
    assert decode_checkpoint((log_dir / "cleaner-offset-checkpoint").read_bytes()) == {T0: PER_SEGMENT}
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=SystemClock())
    try:
        offsets = [r.offset for r in loaded.logs[T0].read(0, max_records=10_000)]
    finally:
        close_log_dir(loaded)
    assert offsets == [*range(PER_SEGMENT - 10, PER_SEGMENT), *range(PER_SEGMENT, LOG_END)], (
        "below 150 the last record of each key stays; from 150 on nothing was touched"
    )
    assert read_high_watermark_file(log_dir) == {T0: HIGH_WATERMARK, FUTURE: FUTURE_HIGH_WATERMARK}


@pytest.mark.parametrize(
    "command",
    [["explain", "--json"], ["retention"], ["clean"], ["serve", "--override", "api.port=0"]],
    ids=lambda c: c[0],
)
def test_a_malformed_file_is_exit_2_naming_file_and_line_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    high_watermark_file(log_dir).write_bytes(b"0\n2\nt 0 160\nmoving 0\n")
    before = snapshot(log_dir)
    code, out, err = run(capsys, log_dir, *command)
    assert code == 2, (out, err)
    [line] = err.strip().splitlines()
    assert str(high_watermark_file(log_dir).resolve()) in line and "line 4" in line, line
    after = snapshot(log_dir)
    after.pop(".lock", None)  # the dir lock's file, which a broker leaves too
    assert after == before

"""A partition being moved between log dirs: never cleaned while its ``-future`` replica exists.

Kafka's ``ReplicaManager`` pauses the cleaning of such a partition (``abortAndPauseCleaning``) until the
future replica is promoted, and its retention task passes paused partitions over (``cleanupLogs``).
logcleaner leaves the future replica alone (not its to manage) and pauses the current one the same way;
``explain`` says why (``future-replica``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.shell.cli import main
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from tests.api.conftest import serve_daemon
from tests.service.cli_logs import snapshot

DAY_MS = 86_400_000


def make_moving_partition(root: Path) -> tuple[Path, Path]:
    """``t-0`` in ``a`` (4 segments of 10-day-old records over 5 keys), its future replica in ``b``."""
    a, b = root / "a", root / "b"
    (a / "t-0").mkdir(parents=True)
    loaded = load_log_dir(a, lambda _t: LogConfig(segment_bytes=1_000), clock=SystemClock())
    [log] = loaded.logs.values()
    stamp = SystemClock().now_ms() - 10 * DAY_MS
    for offset in range(200):
        log.append_records([Record(0, stamp, b"k%d" % (offset % 5), b"v%d" % offset)])
    close_log_dir(loaded)
    future = b / f"t-0.{'ab' * 16}-future"
    future.mkdir(parents=True)
    for name in sorted(p.name for p in (a / "t-0").iterdir() if p.suffix == ".log")[:1]:
        (future / name).write_bytes((a / "t-0" / name).read_bytes())
    return a, b


def run(capsys: pytest.CaptureFixture[str], a: Path, b: Path, *args: str) -> tuple[int, str, str]:
    overrides = [f"log.dirs={a},{b}", "log.cleanup.policy=compact,delete", "log.retention.hours=24"]
    code = main([*args, *[arg for o in overrides for arg in ("--override", o)]])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_current_replica_is_neither_cleaned_nor_retained_and_explain_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = make_moving_partition(tmp_path)
    code, out, err = run(capsys, a, b, "explain", "--json")
    assert code == 0, err
    [partition] = json.loads(out)["partitions"]
    assert (partition["cleaner"]["would_clean"], partition["cleaner"]["reason"]) == (False, "future-replica")
    assert {s["reason"] for s in partition["segments"]} == {"future-replica"}
    [future] = b.glob("*-future")
    before = snapshot(a / "t-0"), snapshot(future)
    code, out, err = run(capsys, a, b, "clean", "--json")
    assert code == 0, err
    assert json.loads(out)["cleaned"] == []
    code, out, err = run(capsys, a, b, "retention", "--json")
    assert code == 0 and json.loads(out)["deleted"] == [], err
    assert (snapshot(a / "t-0"), snapshot(future)) == before, "neither replica changed"
    code, _, err = run(capsys, a, b, "clean", "--topic", "t", "--partition", "0")
    assert code != 0 and "paused" in err, err


def test_once_the_future_replica_is_gone_the_partition_is_cleaned(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = make_moving_partition(tmp_path)
    for path in sorted(b.iterdir()):
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    code, out, err = run(capsys, a, b, "clean", "--json")
    assert code == 0, err
    assert [(c["topic"], c["partition"]) for c in json.loads(out)["cleaned"]] == [("t", 0)]


def test_the_daemons_cleaner_lists_it_paused_for_its_future_replica(tmp_path: Path) -> None:
    a, b = make_moving_partition(tmp_path)
    overrides = {"log.dirs": f"{a},{b}", "log.cleanup.policy": "compact", "log.cleaner.engine": "in-process"}
    with serve_daemon(a, overrides) as served:
        status = served.client.get("/v1/cleaner").json()
        assert status["paused"] == [{"topic": "t", "partition": 0, "reason": "future-replica"}]
        detail = served.client.get("/v1/retention/explain", params={"topic": "t", "partition": 0}).json()
        [partition] = detail["partitions"]
        assert partition["cleaner"]["reason"] == "future-replica"

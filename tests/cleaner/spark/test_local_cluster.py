"""The Spark path on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own Python workers, as on
a real cluster (the log dir is shared because both run on this machine). Its own SparkSession, so the
round runs in another process; the result must equal the oracle's byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cleaner.compaction.oracle import clean_in_process
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from tests.cleaner.helpers import compact_config
from tests.cleaner.spark.fixed_logs import SEGMENT_BYTES, write_mixed_log
from tests.cleaner.spark.random_logs import START_MS, files
from tests.cleaner.spark.round_process import run_round_process


@pytest.mark.slow
def test_a_local_cluster_round_equals_the_oracle(tmp_path: Path) -> None:
    write_mixed_log(tmp_path / "oracle-0")
    shutil.copytree(tmp_path / "oracle-0", tmp_path / "spark-0")
    now = START_MS + 60_000
    config = compact_config(segment_bytes=SEGMENT_BYTES)
    oracle = load_partition_log(tmp_path / "oracle-0", config, clock=ManualClock(now)).log
    upper = oracle.active_segment.base_offset
    assert len(oracle.segments) > 4
    expected = clean_in_process(oracle, 0, upper, now)
    oracle.close()

    spec = {
        "directory": str(tmp_path / "spark-0"),
        "segment_bytes": SEGMENT_BYTES,
        "first_dirty": 0,
        "upper": upper,
        "now_ms": now,
        "master": "local-cluster[2,1,1024]",
    }
    done = run_round_process(spec, tmp_path / "scratch")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"end_offset": expected.end_offset}
    assert files(tmp_path / "spark-0") == files(tmp_path / "oracle-0")

"""``EngineChoice``: where a cleaning round runs (in-process or Spark), from the engine setting, the Spark
threshold and, with a cluster master, the engine expected to finish first."""

from __future__ import annotations

import pytest

from service.core.engine_choice import EngineChoice, EngineRates, EngineReason, cluster_cores


def test_auto_picks_spark_from_the_threshold_on() -> None:
    choice = EngineChoice("auto", 1000)
    assert choice.choose(999) == ("in-process", EngineReason.BELOW_SPARK_MIN_BYTES)
    assert choice.choose(1000) == ("spark", EngineReason.AT_OR_ABOVE_SPARK_MIN_BYTES)
    assert EngineChoice("spark", 1000).choose(0) == ("spark", EngineReason.FORCED)
    assert EngineChoice("in-process", 0).choose(10**12) == ("in-process", EngineReason.FORCED)


def test_auto_with_a_cluster_master_picks_the_engine_expected_to_finish_first() -> None:
    """Job start + bytes / (cores x per-core rate) against bytes / in-process rate."""
    rates = EngineRates(in_process_bytes_per_s=1000.0, spark_core_bytes_per_s=500.0, spark_job_start_s=5.0)
    choice = EngineChoice("auto", 10**15, cluster_cores=8, rates=rates)
    assert choice.choose(1_000) == ("in-process", EngineReason.IN_PROCESS_SOONER)  # 1 s against 5.25 s
    assert choice.choose(100_000) == ("spark", EngineReason.CLUSTER_SOONER)  # 100 s against 30 s
    assert choice.estimates(100_000) == {"in_process_s": 100.0, "spark_s": 30.0}
    rates.observe("spark", 400_000, 15.0, cores=8)  # 10 s of work on 8 cores after the start
    assert rates.spark_core_bytes_per_s == pytest.approx(0.7 * 500 + 0.3 * 5000)
    assert EngineChoice("auto", 10**15).estimates(100_000) is None, "Spark in this process: the threshold"


def test_cluster_cores_come_from_a_cluster_masters_cores_max() -> None:
    assert cluster_cores({"spark.master": "spark://10.0.0.1:7077", "spark.cores.max": "16"}) == 16
    assert cluster_cores({"spark.master": "spark://10.0.0.1:7077"}) == 0, "not known: the threshold rule"
    assert cluster_cores({"spark.master": "local[*]", "spark.cores.max": "16"}) == 0

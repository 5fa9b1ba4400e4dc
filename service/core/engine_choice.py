"""Which engine a cleaning round runs on (``log.cleaner.engine``, ``log.cleaner.spark.min.bytes``).

With ``auto`` and Spark in this process (``spark.master=local[...]``), a round goes to Spark only when the
bytes it will read (every segment below its first uncleanable offset: the clean prefix it rewrites and the
dirty section it maps) reach the threshold; smaller rounds run in-process, so small logs never start a JVM.

With ``auto`` and a cluster master (``spark://``, ``k8s://``, ``yarn``) whose cores are known
(``spark.cores.max``), a round goes to Spark when the cluster is expected to finish it sooner than one
in-process thread: ``job start + bytes / (cores x per-core rate)`` against ``bytes / in-process rate``. The
rates start at the figures ``docs/performance.md`` gives and follow the rounds the daemon runs
(``EngineRates``, an average of the last rounds of each engine). The cleaner decides with this, and
``explain`` says what it would decide now, with both estimates.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from service.config.broker_config import BrokerConfig
from service.config.definitions import SPARK_MIN_BYTES_DEFAULT

__all__ = ["ENGINE_AUTO", "ENGINE_IN_PROCESS", "ENGINE_SPARK", "EngineChoice", "EngineRates", "EngineReason"]

ENGINE_SPARK = "spark"
ENGINE_IN_PROCESS = "in-process"
ENGINE_AUTO = "auto"

_CLUSTER_PREFIXES = ("spark://", "k8s://", "yarn", "mesos://")
_MIB = 1 << 20
# docs/performance.md: one in-process thread cleans about 1,500 MiB/s; Spark about 600 MiB/s a core once
# its job runs, and a job takes seconds to start on a cluster.
IN_PROCESS_BYTES_PER_S = 1_500 * _MIB
SPARK_CORE_BYTES_PER_S = 600 * _MIB
SPARK_JOB_START_S = 5.0
_WEIGHT = 0.3  # of each new round in the running averages


class EngineReason(enum.StrEnum):
    FORCED = "forced-by-log.cleaner.engine"
    BELOW_SPARK_MIN_BYTES = "below-spark-min-bytes"
    AT_OR_ABOVE_SPARK_MIN_BYTES = "at-or-above-spark-min-bytes"
    CLUSTER_SOONER = "cluster-expected-sooner"
    IN_PROCESS_SOONER = "in-process-expected-sooner"


@dataclass(slots=True)
class EngineRates:
    """What rounds have shown of each engine: the in-process bytes a second, Spark's bytes a second a core
    and its job start. ``_lock`` guards all three (rounds report from the cleaner's threads)."""

    in_process_bytes_per_s: float = IN_PROCESS_BYTES_PER_S
    spark_core_bytes_per_s: float = SPARK_CORE_BYTES_PER_S
    spark_job_start_s: float = SPARK_JOB_START_S
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def observe(self, engine: str, bytes_read: int, seconds: float, *, cores: int = 1) -> None:
        """A finished round: its engine, the bytes it read and its wall time (``cores``: Spark's)."""
        if bytes_read <= 0 or seconds <= 0:
            return
        with self._lock:
            if engine == ENGINE_IN_PROCESS:
                self.in_process_bytes_per_s = _mean(self.in_process_bytes_per_s, bytes_read / seconds)
            elif engine == ENGINE_SPARK:
                start = self.spark_job_start_s
                working = max(seconds - start, seconds / 2)
                self.spark_core_bytes_per_s = _mean(self.spark_core_bytes_per_s, bytes_read / working / cores)

    def estimates(self, bytes_to_read: int, cores: int) -> tuple[float, float]:
        """Seconds one in-process thread and the cluster's ``cores`` are expected to take."""
        with self._lock:
            in_process = bytes_to_read / self.in_process_bytes_per_s
            spark = self.spark_job_start_s + bytes_to_read / (cores * self.spark_core_bytes_per_s)
        return in_process, spark


@dataclass(frozen=True, slots=True)
class EngineChoice:
    """The broker's engine setting (``auto``, ``spark`` or ``in-process``), the ``auto`` threshold, and a
    cluster master's cores (0: Spark runs in this process, or its cores are not known)."""

    setting: str = ENGINE_AUTO
    spark_min_bytes: int = SPARK_MIN_BYTES_DEFAULT
    cluster_cores: int = 0
    rates: EngineRates = field(default_factory=EngineRates, compare=False)

    def choose(self, bytes_to_read: int) -> tuple[str, EngineReason]:
        """(engine, why) for a round that will read ``bytes_to_read`` bytes."""
        if self.setting != ENGINE_AUTO:
            return self.setting, EngineReason.FORCED
        if self.cluster_cores > 0:
            in_process, spark = self.rates.estimates(bytes_to_read, self.cluster_cores)
            if spark < in_process:
                return ENGINE_SPARK, EngineReason.CLUSTER_SOONER
            return ENGINE_IN_PROCESS, EngineReason.IN_PROCESS_SOONER
        if bytes_to_read >= self.spark_min_bytes:
            return ENGINE_SPARK, EngineReason.AT_OR_ABOVE_SPARK_MIN_BYTES
        return ENGINE_IN_PROCESS, EngineReason.BELOW_SPARK_MIN_BYTES

    def estimates(self, bytes_to_read: int) -> dict[str, float] | None:
        """``{"in_process_s", "spark_s"}`` where ``auto`` compares them (a cluster master), else None."""
        if self.setting != ENGINE_AUTO or self.cluster_cores <= 0:
            return None
        in_process, spark = self.rates.estimates(bytes_to_read, self.cluster_cores)
        return {"in_process_s": round(in_process, 3), "spark_s": round(spark, 3)}

    @classmethod
    def of(cls, broker: BrokerConfig, rates: EngineRates | None = None) -> EngineChoice:
        """The broker's ``log.cleaner.engine``, ``log.cleaner.spark.min.bytes`` and cluster cores."""
        return cls(
            broker.log_cleaner_engine,
            broker.log_cleaner_spark_min_bytes,
            cluster_cores(broker.spark_conf),
            rates or EngineRates(),
        )

    @property
    def may_use_spark(self) -> bool:
        return self.setting != ENGINE_IN_PROCESS


def cluster_cores(spark_conf: Mapping[str, str]) -> int:
    """``spark.cores.max`` of a cluster master (``spark://``, ``k8s://``, ``yarn``); 0 for ``local[...]``
    or when the cores are not set (the threshold rule then stands)."""
    conf = spark_conf
    master = str(conf.get("spark.master", ""))
    if not master.startswith(_CLUSTER_PREFIXES):
        return 0
    try:
        return max(int(str(conf.get("spark.cores.max", "0")).strip()), 0)
    except ValueError:
        return 0


def _mean(current: float, new: float) -> float:
    return (1 - _WEIGHT) * current + _WEIGHT * new

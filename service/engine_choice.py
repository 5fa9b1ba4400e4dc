"""Which engine a cleaning round runs on (``log.cleaner.engine``, ``log.cleaner.spark.min.bytes``).

With ``auto`` a round goes to Spark only when the bytes it will read (every segment below its first
uncleanable offset: the clean prefix it rewrites and the dirty section it maps) reach the threshold; smaller
rounds run in-process, so small logs never start a JVM. The cleaner decides with this, and ``explain`` says
what it would decide now.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from service.config.broker_config import BrokerConfig
from service.config.definitions import SPARK_MIN_BYTES_DEFAULT

__all__ = ["ENGINE_AUTO", "ENGINE_IN_PROCESS", "ENGINE_SPARK", "EngineChoice", "EngineReason"]

ENGINE_SPARK = "spark"
ENGINE_IN_PROCESS = "in-process"
ENGINE_AUTO = "auto"


class EngineReason(enum.StrEnum):
    FORCED = "forced-by-log.cleaner.engine"
    BELOW_SPARK_MIN_BYTES = "below-spark-min-bytes"
    AT_OR_ABOVE_SPARK_MIN_BYTES = "at-or-above-spark-min-bytes"


@dataclass(frozen=True, slots=True)
class EngineChoice:
    """The broker's engine setting (``auto``, ``spark`` or ``in-process``) and the ``auto`` threshold."""

    setting: str = ENGINE_AUTO
    spark_min_bytes: int = SPARK_MIN_BYTES_DEFAULT

    def choose(self, bytes_to_read: int) -> tuple[str, EngineReason]:
        """(engine, why) for a round that will read ``bytes_to_read`` bytes."""
        if self.setting != ENGINE_AUTO:
            return self.setting, EngineReason.FORCED
        if bytes_to_read >= self.spark_min_bytes:
            return ENGINE_SPARK, EngineReason.AT_OR_ABOVE_SPARK_MIN_BYTES
        return ENGINE_IN_PROCESS, EngineReason.BELOW_SPARK_MIN_BYTES

    @classmethod
    def of(cls, broker: BrokerConfig) -> EngineChoice:
        """The broker's ``log.cleaner.engine`` and ``log.cleaner.spark.min.bytes``."""
        return cls(broker.log_cleaner_engine, broker.log_cleaner_spark_min_bytes)

    @property
    def may_use_spark(self) -> bool:
        return self.setting != ENGINE_IN_PROCESS

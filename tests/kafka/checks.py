"""What a broker must show after it starts on files logcleaner changed: no log recovered (the clean-shutdown
marker honoured) and no complaint about any log, index, snapshot, checkpoint or epoch file."""

from __future__ import annotations

import re
from pathlib import Path

from tests.kafka.broker import KafkaBroker

__all__ = ["assert_started_cleanly", "segment_base_offsets"]

METADATA_LOG = "__cluster_metadata"
"""KRaft's own log, which Kafka recovers at every start whatever the marker says (KafkaMetadataLog)."""

RECOVERY = re.compile(
    r"Recovering unflushed segment|Recovering file|since no clean shutdown file|Recovering \d+ logs"
    r"|Found invalid|Found log file .* from interrupted swap|Deleting stray temporary file"
    r"|Resetting (?:recovery|log start)|Truncating"
)
FILE_WORDS = re.compile(
    r"(?i)\blog\b|\.log\b|segment|index|snapshot|checkpoint|epoch|offset|corrupt|cleaner|producer state|"
    r"partition\.metadata|clean ?shutdown|recover"
)


def assert_started_cleanly(broker: KafkaBroker) -> None:
    """The broker loaded every log without recovering it and warned about none of their files."""
    text = broker.log_since_start()
    if re.search(r"No logs found to be loaded", text) is None:
        assert "since clean shutdown file was found" in text, f"no clean-shutdown line:\n{text[-4000:]}"
    recoveries = [line for line in text.splitlines() if RECOVERY.search(line) and METADATA_LOG not in line]
    assert not recoveries, "the broker recovered logs:\n" + "\n".join(recoveries)
    complaints = [
        line for line in broker.log_lines_since_start("WARN|ERROR|FATAL") if FILE_WORDS.search(line)
    ]
    assert not complaints, "the broker complained about files:\n" + "\n".join(complaints)


def segment_base_offsets(partition_dir: Path) -> list[int]:
    """The base offsets of the segments in a partition dir, in order."""
    return sorted(int(p.name.split(".")[0]) for p in partition_dir.glob("*.log"))

"""A broker's metadata log at 100,000 partitions (issue 47): one topic config change read on, against the
whole log read again.

Run on demand (not part of CI's pass/fail), from the repository root:

    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_metadata [--partitions 100000] [--changes 7]

It writes, under a temporary folder, what a controller writes for ``--partitions`` partitions (topics of
``--per-topic`` partitions: a ``TopicRecord``, a ``PartitionRecord`` per partition assigned to node 1,
and a ``ConfigRecord`` per topic, in batches as ``gen_metadata`` writes them) with ``meta.properties``,
reads it once with ``MetadataSource.load`` (the baseline: the whole log, as every change cost before),
then ``--changes`` times appends one batch holding one ``ConfigRecord`` to the last segment, as
``kafka-configs.sh --alter`` makes the controller do, and times ``MetadataSource.load_if_changed``: the
change read on (target ≤ 100 ms), its median set against the whole reading's. Each change is checked to
be in the image, and the last image against a whole reading of the same files. ``known_topics()``, which
the daemon's stray check calls after each change, is timed too.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from service.config.broker_config import BrokerConfig
from service.metadata.log_reader import METADATA_PARTITION_DIR
from service.metadata.log_writer import MetadataRecordSpec, encode_metadata_batch
from service.metadata.records import CONFIG_RECORD_KEY, PARTITION_RECORD_KEY, TOPIC_RECORD_KEY
from service.metadata.source import MetadataSource

NODE_ID = 1
NOW_MS = 1_700_000_000_000
RECORDS_PER_BATCH = 1000
TARGET_MS = 100.0


def topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def config(topic: str, key: str, value: str) -> MetadataRecordSpec:
    fields = {"resource_type": 2, "resource_name": topic, "name": key, "value": value}
    return MetadataRecordSpec(CONFIG_RECORD_KEY, 0, fields)


def records(partitions: int, per_topic: int) -> list[MetadataRecordSpec]:
    specs: list[MetadataRecordSpec] = []
    for t in range(-(-partitions // per_topic)):
        name, tid = f"bench-{t}", topic_id()
        specs.append(MetadataRecordSpec(TOPIC_RECORD_KEY, 0, {"name": name, "topic_id": tid}))
        for p in range(min(per_topic, partitions - t * per_topic)):
            fields = {
                "partition_id": p,
                "topic_id": tid,
                "replicas": [NODE_ID],
                "isr": [NODE_ID],
                "removing_replicas": [],
                "adding_replicas": [],
                "leader": NODE_ID,
                "leader_epoch": 0,
                "partition_epoch": 0,
            }
            specs.append(MetadataRecordSpec(PARTITION_RECORD_KEY, 0, fields))
        specs.append(config(name, "retention.ms", "604800000"))
    return specs


def build(log_dir: Path, partitions: int, per_topic: int) -> tuple[Path, int]:
    """The metadata log's one segment and its next offset."""
    (log_dir / "meta.properties").write_text(f"version=1\ncluster.id={topic_id()}\nnode.id={NODE_ID}\n")
    directory = log_dir / METADATA_PARTITION_DIR
    directory.mkdir(parents=True)
    specs = records(partitions, per_topic)
    segment = directory / f"{0:020d}.log"
    with segment.open("wb") as file:
        for start in range(0, len(specs), RECORDS_PER_BATCH):
            batch = specs[start : start + RECORDS_PER_BATCH]
            file.write(encode_metadata_batch(batch, base_offset=start, timestamp=NOW_MS))
    return segment, len(specs)


def timed_ms(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--changes", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="logcleaner-bench-metadata-") as tmp:
        log_dir = Path(tmp)
        segment, next_offset = build(log_dir, args.partitions, args.per_topic)
        broker, _ = BrokerConfig.from_properties({"log.dirs": str(log_dir)})
        source = MetadataSource(broker)
        full_ms = [timed_ms(source.load) for _ in range(3)]
        mib, load = os.path.getsize(segment) / 2**20, os.getloadavg()[0]
        print(f"{args.partitions} partitions, {next_offset} records, {mib:.1f} MiB; load average {load:.1f}")
        print(f"whole reading (MetadataSource.load): {', '.join(f'{t:.0f}' for t in full_ms)} ms")
        change_ms = []
        for n in range(args.changes):
            topic, value = f"bench-{n % 10}", str(1000 + n)
            batch = encode_metadata_batch(
                [config(topic, "retention.ms", value)], base_offset=next_offset, timestamp=NOW_MS
            )
            with segment.open("ab") as file:
                file.write(batch)
            next_offset += 1
            change_ms.append(timed_ms(source.load_if_changed))
            image = source.image
            if image is None or image.topic_configs[topic]["retention.ms"] != value:
                raise SystemExit(f"change {n} is not in the image")
        known_ms = [timed_ms(source.known_topics) for _ in range(3)]
        print(
            "then known_topics(), which the daemon's stray check of its live logs calls on each change: "
            f"{', '.join(f'{t:.0f}' for t in known_ms)} ms"
        )
        whole = MetadataSource(broker)
        whole.load()
        if whole.image != source.image:
            raise SystemExit("the image read on differs from a whole reading of the same files")
        full, change = statistics.median(full_ms), statistics.median(change_ms)
        verdict = "ok" if change <= TARGET_MS else "MISSED"
        print(f"one config change read on (load_if_changed): {', '.join(f'{t:.1f}' for t in change_ms)} ms")
        print(
            f"median {change:.1f} ms (target ≤ {TARGET_MS:.0f} ms: {verdict}) against the whole reading's "
            f"{full:.0f} ms: {change / full:.4f} of it"
        )


if __name__ == "__main__":
    main()

"""Kafka's own cleaner thread and logcleaner's in-process engine on the same compacted log, one thread each,
in the same run.

Run on demand (not part of CI's pass/fail; Java 17+ and Maven, as tests/kafka/ needs):

    python tests/benchmarks/bench_kafka_cleaner.py [--records 4000000] [--keys 200000] [--value-size 100]
        [--dedupe-buffer-mib N]

A real broker (Kafka 4.4.0, or ``LOGCLEANER_KAFKA_VERSION``) with Kafka's own JVM options (1 GiB heap, G1,
the full JIT) is fed two compacted partitions through librdkafka, in 64 MiB segments (``--segment-mib``),
while its cleaner is idle, then stopped; its dir is copied. The broker restarts with one cleaner thread,
which cleans a warm-up partition (half the size) and then the measured one's closed segments; Kafka's
figure is the ``MB of log processed … (MB/sec)`` of the statistics line its cleaner logs
(``LogCleaner.recordStats``). ``logcleaner clean`` (``log.cleaner.threads=1``, the in-process engine) then
cleans the measured partition of the copy; its figure is computed as Kafka computes its own: the bytes of
the cleaning pass over the round's whole duration, map building included. Both logs start in the page
cache, just written. Prints both figures and the ratio.

With ``--dedupe-buffer-mib N`` (issue 48's shape: a partition of many more keys than the buffer holds, e.g.
``--records 4000000 --keys 4000000 --dedupe-buffer-mib 8``: ~2.5M keys against Kafka's 315k entries),
both cleaners get ``log.cleaner.dedupe.buffer.size`` = N MiB (one thread). Kafka's cleaner then needs one
round per buffer-full of keys, each re-reading the log below its end; its total is the sum of every round
of the measured partition (each round's statistics line) until its checkpoint reaches the end. logcleaner
cleans the same dirty range in one round whose key map spills beyond the same buffer. Prints both totals,
Kafka's rounds, and the ratio of the totals (Kafka's / logcleaner's). The issue's full shape is
``--records 30000000 --keys 30000000 --dedupe-buffer-mib 64`` (about 8 Kafka rounds; an hour or more here).
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

# The typed homes of the classes confluent_kafka.admin re-exports.
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._resource import ResourceType

from service.storage.topic_partition import TopicPartition
from tests.kafka.broker import KafkaBroker, kafka_jvm_flags
from tests.kafka.clients import QUIET, create_topic
from tests.kafka.distribution import load_distribution
from tests.kafka.round_trip import active_segment_base, wait_for_cleaner_checkpoint
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json

TOPIC = "bench"
WARMUP_TOPIC = "warm-up"
"""Cleaned first by the same broker, so the measured round runs on a JIT-compiled cleaner, as a broker's
long-running cleaner thread does."""
KAFKA_JVM_FLAGS = kafka_jvm_flags("1g")
KAFKA_STATS = re.compile(r"([\d,.]+) MB of log processed in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)")
KAFKA_ROUND = re.compile(
    rf"cleaned log {TOPIC}-0 \(dirty section = \[(\d+), (\d+)\]\)\s+"
    r"([\d,.]+) MB of log processed in ([\d,.]+) seconds"
)
MIB = 1024 * 1024


def produce_partition(bootstrap_servers: str, topic: str, records: int, keys: int, value_size: int) -> None:
    """Keyed records with incompressible values, as fast as librdkafka sends them."""
    rng = random.Random(0)
    values = [rng.randbytes(value_size) for _ in range(1024)]
    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "linger.ms": 20, "batch.size": 1_000_000, **QUIET}
    )
    for i in range(records):
        key = b"key-%d" % rng.randrange(keys)
        while True:
            try:
                producer.produce(topic, key=key, value=values[i & 1023], partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("records left unsent after 300 s")


def clean_now(broker: KafkaBroker, topic: str, end_offset: int) -> None:
    """Lower the topic's min.cleanable.dirty.ratio on the running broker and wait for its cleaner's round."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **QUIET})
    ratio = ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[ratio])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=60)
    wait_for_cleaner_checkpoint(broker.log_dir, {TopicPartition(topic, 0): end_offset}, timeout_s=1800)


def kafka_cleaner_rounds(broker: KafkaBroker, ends: dict[str, int], buffer_bytes: int | None) -> str:
    """Restart the broker (one cleaner thread, its dedupe buffer ``buffer_bytes`` if given), let it clean
    the warm-up topic, then the measured one; the broker's log of this run."""
    properties = {"log.cleaner.backoff.ms": "100", "log.cleaner.threads": "1"}
    if buffer_bytes is not None:
        properties["log.cleaner.dedupe.buffer.size"] = str(buffer_bytes)
    broker.update_properties(properties)
    broker.start()
    clean_now(broker, WARMUP_TOPIC, ends[WARMUP_TOPIC])
    clean_now(broker, TOPIC, ends[TOPIC])
    broker.stop()
    return broker.log_since_start()


def kafka_rounds_total(text: str) -> tuple[int, float, float]:
    """Every round of the measured partition in the broker's log: (rounds, MiB processed, seconds)."""
    rounds = [
        (float(mb.replace(",", "")), float(s.replace(",", ""))) for *_, mb, s in KAFKA_ROUND.findall(text)
    ]
    if not rounds:
        raise RuntimeError(f"no statistics line of the broker's cleaner for {TOPIC}-0")
    return len(rounds), sum(mb for mb, _s in rounds), sum(s for _mb, s in rounds)


def kafka_cleaner_mb_per_s(text: str) -> tuple[float, float, float]:
    """The measured round's statistics line: (MiB processed, seconds, MiB/s)."""
    found = KAFKA_STATS.findall(text[text.index(f"cleaned log {TOPIC}-0") :])
    if not found:
        raise RuntimeError(f"no statistics line of the broker's cleaner for {TOPIC}-0")
    return tuple(float(x.replace(",", "")) for x in found[0])  # type: ignore[return-value]  # three floats


def logcleaner_round(log_dir: Path, end_offset: int, buffer_bytes: int | None) -> dict[str, Any]:
    """``logcleaner clean`` of the measured partition in ``log_dir`` (its dedupe buffer ``buffer_bytes`` if
    given): the stats of its one round, which must reach ``end_offset``."""
    overrides = ["log.cleaner.threads=1"]
    if buffer_bytes is not None:
        overrides.append(f"log.cleaner.dedupe.buffer.size={buffer_bytes}")
    options = log_dir_options(log_dir, *overrides)
    cleaned = logcleaner_json("clean", "--topic", TOPIC, "--partition", "0", *options)["cleaned"]
    rounds = [entry for entry in cleaned if entry["topic"] == TOPIC]
    if [entry["end_offset"] for entry in rounds] != [end_offset]:
        raise RuntimeError(f"expected one round to offset {end_offset}, got {cleaned}")
    return dict(rounds[0]["stats"])


def mb_per_s(stats: dict[str, Any]) -> tuple[float, float, float]:
    """A logcleaner round's (MiB of the cleaning pass, seconds, MiB/s), as Kafka reckons them."""
    mib, seconds = stats["bytes_read"] / MIB, stats["elapsed_ms"] / 1000
    return mib, seconds, mib / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=4_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument(
        "--segment-mib", type=int, default=64, help="segment.bytes in MiB (Kafka 4.x: 1 at least)"
    )
    parser.add_argument(
        "--dedupe-buffer-mib",
        type=int,
        default=None,
        help="log.cleaner.dedupe.buffer.size of both cleaners, in MiB (default: Kafka's 128); "
        "then both totals are compared",
    )
    args = parser.parse_args()
    buffer_bytes = None if args.dedupe_buffer_mib is None else args.dedupe_buffer_mib * MIB
    distribution = load_distribution()
    with tempfile.TemporaryDirectory(prefix="bench-kafka-cleaner-") as work:
        broker = KafkaBroker(distribution, Path(work) / "broker", jvm_flags=KAFKA_JVM_FLAGS)
        try:
            broker.format()
            broker.start()
            for topic, records in ((WARMUP_TOPIC, args.records // 2), (TOPIC, args.records)):
                # The broker's min.cleanable.ratio of 1 keeps its cleaner idle until clean_now.
                config = {"cleanup.policy": "compact", "segment.bytes": str(args.segment_mib * MIB)}
                create_topic(broker.bootstrap_servers, topic, config=config)
                started = time.perf_counter()
                produce_partition(broker.bootstrap_servers, topic, records, args.keys, args.value_size)
                print(f"{topic}: {records:,d} records produced in {time.perf_counter() - started:.1f} s")
            broker.stop()
            ends = {
                topic: active_segment_base(broker, topic, min_segments=2) for topic in (WARMUP_TOPIC, TOPIC)
            }
            copy = Path(work) / "copy"
            shutil.copytree(broker.log_dir, copy)
            kafka_log = kafka_cleaner_rounds(broker, ends, buffer_bytes)
        finally:
            broker.stop(check=False)
        ours = logcleaner_round(copy, ends[TOPIC], buffer_bytes)
    if buffer_bytes is not None:
        report_totals(distribution.version, kafka_log, ours, args.dedupe_buffer_mib)
        return
    report_rates(distribution.version, kafka_cleaner_mb_per_s(kafka_log), mb_per_s(ours))


def report_totals(version: str, kafka_log: str, ours: dict[str, Any], buffer_mib: int) -> None:
    rounds, kafka_mib, kafka_seconds = kafka_rounds_total(kafka_log)
    seconds = ours["elapsed_ms"] / 1000
    print(
        f"Kafka {version} cleaner thread, {buffer_mib} MiB buffer: {rounds} rounds, "
        f"{kafka_mib:,.1f} MiB processed in {kafka_seconds:.1f} s"
    )
    print(
        f"logcleaner, {buffer_mib} MiB buffer: 1 round ({ours['map_size']:,d} keys, key map spilled to "
        f"{ours['spill_classes']} classes), {ours['bytes_read'] / MIB:,.1f} MiB in {seconds:.2f} s"
    )
    print(f"ratio (Kafka's total time / logcleaner's): {kafka_seconds / seconds:.2f}x")


def report_rates(version: str, kafka: tuple[float, float, float], ours: tuple[float, float, float]) -> None:
    for name, (mib, seconds, rate) in (
        (f"Kafka {version} cleaner thread", kafka),
        ("logcleaner", ours),
    ):
        print(f"{name:>28}: {mib:,.1f} MiB in {seconds:.2f} s, {rate:,.1f} MiB/s")
    print(f"ratio (logcleaner / Kafka): {ours[2] / kafka[2]:.2f}x")


if __name__ == "__main__":
    main()

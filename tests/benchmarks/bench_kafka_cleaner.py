"""Kafka's own cleaner thread and logcleaner's in-process engine on the same compacted log, one thread each,
in the same run.

Run on demand (not part of CI's pass/fail; Java 17+ and Maven, as tests/kafka/ needs):

    python tests/benchmarks/bench_kafka_cleaner.py [--records 4000000] [--keys 200000] [--value-size 100]

A real broker (Kafka 4.4.0, or ``LOGCLEANER_KAFKA_VERSION``) with Kafka's own JVM options (1 GiB heap, G1,
the full JIT) is fed two compacted partitions through librdkafka, in 64 MiB segments (``--segment-mib``),
while its cleaner is idle, then stopped; its dir is copied. The broker restarts with one cleaner thread,
which cleans a warm-up partition (half the size) and then the measured one's closed segments; Kafka's
figure is the ``MB of log processed … (MB/sec)`` of the statistics line its cleaner logs
(``LogCleaner.recordStats``). ``logcleaner clean`` (``log.cleaner.threads=1``, the in-process engine) then
cleans the measured partition of the copy; its figure is computed as Kafka computes its own: the bytes of
the cleaning pass over the round's whole duration, map building included. Both logs start in the page
cache, just written. Prints both figures and the ratio.
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


def kafka_cleaner_mb_per_s(broker: KafkaBroker, ends: dict[str, int]) -> tuple[float, float, float]:
    """Restart the broker (one cleaner thread), let it clean the warm-up topic, then the measured one, and
    read the measured round's statistics line: (MiB processed, seconds, MiB/s)."""
    broker.update_properties({"log.cleaner.backoff.ms": "100", "log.cleaner.threads": "1"})
    broker.start()
    clean_now(broker, WARMUP_TOPIC, ends[WARMUP_TOPIC])
    clean_now(broker, TOPIC, ends[TOPIC])
    broker.stop()
    text = broker.log_since_start()
    found = KAFKA_STATS.findall(text[text.index(f"cleaned log {TOPIC}-0") :])
    if not found:
        raise RuntimeError(f"no statistics line of the broker's cleaner for {TOPIC}-0 in {broker.server_log}")
    return tuple(float(x.replace(",", "")) for x in found[0])  # type: ignore[return-value]  # three floats


def logcleaner_mb_per_s(log_dir: Path, end_offset: int) -> tuple[float, float, float]:
    """``logcleaner clean`` of the measured partition in ``log_dir``: (MiB of the cleaning pass, seconds,
    MiB/s), as Kafka reckons them."""
    options = log_dir_options(log_dir, "log.cleaner.threads=1")
    cleaned = logcleaner_json("clean", "--topic", TOPIC, "--partition", "0", *options)["cleaned"]
    rounds = [entry for entry in cleaned if entry["topic"] == TOPIC]
    if [entry["end_offset"] for entry in rounds] != [end_offset]:
        raise RuntimeError(f"expected one round to offset {end_offset}, got {cleaned}")
    stats = rounds[0]["stats"]
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
    args = parser.parse_args()
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
            kafka = kafka_cleaner_mb_per_s(broker, ends)
        finally:
            broker.stop(check=False)
        ours = logcleaner_mb_per_s(copy, ends[TOPIC])
    for name, (mib, seconds, rate) in (
        (f"Kafka {distribution.version} cleaner thread", kafka),
        ("logcleaner", ours),
    ):
        print(f"{name:>28}: {mib:,.1f} MiB in {seconds:.2f} s, {rate:,.1f} MiB/s")
    print(f"ratio (logcleaner / Kafka): {ours[2] / kafka[2]:.2f}x")


if __name__ == "__main__":
    main()

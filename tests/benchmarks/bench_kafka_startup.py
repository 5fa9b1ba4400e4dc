"""A Kafka broker's log loading and ``logcleaner serve``'s start-up on the same dir of many partitions,
after a clean and after an unclean stop, in the same run.

Run on demand (not part of CI's pass/fail; Java 17+ and Maven, as tests/kafka/ needs):

    python tests/benchmarks/bench_kafka_startup.py [--partitions 10000] [--runs 3] [--work-dir DIR]

A real broker (Kafka 4.4.0, or ``LOGCLEANER_KAFKA_VERSION``) with Kafka's own JVM options (G1, the full JIT; a
2 GiB heap, ``--heap``, for 10,000 partitions) gets topics of ``--topic-partitions`` partitions each,
``--partitions`` in all, a few records produced to every partition by an idempotent librdkafka producer (a
non-empty segment, its indexes and a producer snapshot in each), and is stopped cleanly. That dir (its KRaft
metadata log included) is kept; each measured run works on a fresh ``cp -a`` of it, synced, so both sides load
the same bytes, warm in the page cache. An unclean stop is made by removing the copy's
``.kafka_cleanshutdown`` marker, so both sides recover every log from its recovery point. Both sides get
``num.recovery.threads.per.data.dir`` of ``--recovery-threads`` (2, Kafka 4.x's default; logcleaner's is 1):
Kafka loads on that many threads, logcleaner on one whatever it says (``service/storage/log_dir.py``).

Kafka's figure is the ``Loaded N logs in X ms`` line of its ``LogManager.loadLogs`` (the broker's whole
start, JVM to ``Kafka Server started``, is printed beside it). logcleaner's is ``serve`` from process start
until ``/readyz`` answers 200 (as ``bench_startup.py --serve`` times it): interpreter, imports, the KRaft
metadata log's replay, every log loaded, the API up. logcleaner logs no load time of its own; its start-up
line's count of logs loaded and recovered is checked. The two sides alternate which goes first; each
side's median over ``--runs`` runs and the ratio logcleaner ÷ Kafka are printed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # the typed home of the class confluent_kafka.admin re-exports

import tests.kafka.broker as broker_module
from tests.benchmarks.bench_startup import serve_command, wait_until_ready
from tests.kafka.broker import KafkaBroker, free_port, kafka_jvm_flags
from tests.kafka.clients import QUIET
from tests.kafka.distribution import load_distribution
from tests.kafka.run_logcleaner import REPO

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
KAFKA_LOADED = re.compile(r"Loaded (\d+) logs in (\d+)ms")
"""``LogManager.loadLogs``'s ``Loaded {} logs in {}ms{}`` (Kafka 4.4, storage module)."""
LOGCLEANER_STARTED = re.compile(r"(\d+) logs loaded \((\d+) recovered\)")
TOPIC_PREFIX = "bench"


def topic_sizes(partitions: int, per_topic: int) -> dict[str, int]:
    """``partitions`` split into topics of ``per_topic`` partitions (the last one takes the rest)."""
    sizes: dict[str, int] = {}
    while partitions > 0:
        sizes[f"{TOPIC_PREFIX}-{len(sizes)}"] = min(per_topic, partitions)
        partitions -= per_topic
    return sizes


def create_topics(bootstrap_servers: str, sizes: dict[str, int]) -> None:
    """Create the topics and wait until the broker's metadata gives every partition a leader (a producer
    asking sooner is told the topic is unknown, and its records fail)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **QUIET})
    for name, count in sizes.items():  # one request a topic: the controller's batches stay small
        for future in admin.create_topics([NewTopic(name, count, 1)], request_timeout=600).values():
            future.result(timeout=600)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=60).topics
        if all(
            name in topics and sum(p.leader >= 0 for p in topics[name].partitions.values()) == count
            for name, count in sizes.items()
        ):
            return
        time.sleep(0.5)
    raise RuntimeError("the topics' partitions have no leader after 600 s")


def produce_everywhere(bootstrap_servers: str, sizes: dict[str, int], records: int) -> None:
    """``records`` records to every partition, from one idempotent producer (so each partition keeps
    producer state). A record librdkafka reports undelivered (a new topic's metadata not yet known to it,
    say) is produced again, up to 5 rounds; then every partition is known to hold all its records."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 50,
            "message.timeout.ms": 600_000,
            **QUIET,
        }
    )
    todo = [
        (topic, partition, n)
        for n in range(records)
        for topic, count in sizes.items()
        for partition in range(count)
    ]
    for _round in range(5):
        failed: list[tuple[str, int, int]] = []
        for topic, partition, n in todo:
            on_delivery = _on_delivery(failed, (topic, partition, n))
            while True:
                try:
                    producer.produce(
                        topic, key=b"k%d" % n, value=b"v" * 100, partition=partition, on_delivery=on_delivery
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        if producer.flush(600) != 0:
            raise RuntimeError("records left unsent after 600 s")
        if not failed:
            return
        print(f"{len(failed)} records undelivered; producing them again", flush=True)
        todo = failed
    raise RuntimeError(f"{len(todo)} records still undelivered after 5 rounds")


def _on_delivery(
    failed: list[tuple[str, int, int]], record: tuple[str, int, int]
) -> Callable[[KafkaError | None, object], None]:
    def report(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failed.append(record)

    return report


def build(broker: KafkaBroker, sizes: dict[str, int], records: int, pristine: Path) -> None:
    """Format and start the broker, make and fill the topics, stop it cleanly and move its dir to
    ``pristine``."""
    broker.format()
    started = time.perf_counter()
    broker.start()
    try:
        create_topics(broker.bootstrap_servers, sizes)
        print(f"topics created in {time.perf_counter() - started:.1f} s", flush=True)
        produce_everywhere(broker.bootstrap_servers, sizes, records)
        print(f"records produced after {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        broker.stop()
    if not (broker.log_dir / CLEAN_SHUTDOWN_FILE).exists():
        raise RuntimeError(f"the broker left no {CLEAN_SHUTDOWN_FILE} in {broker.log_dir}")
    empty = [
        d.name
        for d in broker.log_dir.glob(f"{TOPIC_PREFIX}-*")
        if not any(f.stat().st_size for f in d.glob("*.log"))
    ]
    if empty:
        raise RuntimeError(f"{len(empty)} partitions hold no record, {empty[0]} among them")
    broker.log_dir.rename(pristine)


def fresh_copy(pristine: Path, target: Path, *, unclean: bool) -> None:
    """``cp -a`` of the built dir, synced; without its clean-shutdown marker if ``unclean``."""
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["cp", "-a", str(pristine), str(target)], check=True)
    if unclean:
        (target / CLEAN_SHUTDOWN_FILE).unlink()
    os.sync()


def kafka_run(broker: KafkaBroker, pristine: Path, *, unclean: bool, partitions: int) -> tuple[float, float]:
    """The broker over a fresh copy: (its ``Loaded N logs in X ms`` in seconds, seconds from launch to
    ``Kafka Server started``)."""
    fresh_copy(pristine, broker.log_dir, unclean=unclean)
    started = time.perf_counter()
    broker.start()
    startup_s = time.perf_counter() - started
    broker.stop()
    text = broker.log_since_start()
    found = KAFKA_LOADED.search(text)
    if found is None:
        raise RuntimeError(f"no 'Loaded N logs in X ms' line in {broker.server_log}")
    if int(found[1]) != partitions:
        raise RuntimeError(f"Kafka loaded {found[1]} logs, expected {partitions}")
    if unclean and "since no clean shutdown file was found" not in text:
        raise RuntimeError("Kafka did not recover: it found a clean shutdown file")
    return int(found[2]) / 1000, startup_s


def logcleaner_run(
    pristine: Path, log_dir: Path, *, unclean: bool, partitions: int, recovery_threads: int
) -> float:
    """``logcleaner serve`` over a fresh copy: seconds from launch to ``/readyz`` 200 (then SIGTERM)."""
    fresh_copy(pristine, log_dir, unclean=unclean)
    port = free_port()
    args = serve_command(log_dir, port, {"num.recovery.threads.per.data.dir": str(recovery_threads)})
    stderr_path = log_dir.parent / "logcleaner.stderr"
    with open(stderr_path, "wb") as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            if not wait_until_ready(port, process):
                raise RuntimeError(f"serve exited {process.returncode}: {stderr_path.read_text()}")
            startup_s = time.perf_counter() - start
            process.send_signal(signal.SIGTERM)
            if process.wait(timeout=600) != 0:
                raise RuntimeError(f"serve exited {process.returncode} on SIGTERM: {stderr_path.read_text()}")
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    found = LOGCLEANER_STARTED.search(stderr_path.read_text())
    if found is None:
        raise RuntimeError(f"no start-up line from serve in {stderr_path}")
    # The KRaft metadata log (__cluster_metadata-0) is one of logcleaner's logs, not one of Kafka's.
    loaded, recovered = int(found[1]), int(found[2])
    if loaded < partitions or (unclean and recovered < partitions) or (not unclean and recovered):
        raise RuntimeError(f"serve: {loaded} logs loaded ({recovered} recovered), {partitions} expected")
    return startup_s


def measure(
    broker: KafkaBroker,
    pristine: Path,
    ours_dir: Path,
    kind: str,
    runs: int,
    partitions: int,
    recovery_threads: int,
) -> tuple[list[float], list[float], list[float]]:
    """``runs`` runs of each side after a ``kind`` (clean or unclean) stop, alternating which goes first:
    Kafka's load seconds, Kafka's launch-to-started seconds, logcleaner's launch-to-ready seconds."""
    unclean = kind == "unclean"
    kafka_loads: list[float] = []
    kafka_starts: list[float] = []
    ours: list[float] = []
    for n in range(runs):
        for side in ("kafka", "logcleaner") if n % 2 == 0 else ("logcleaner", "kafka"):
            if side == "kafka":
                load_s, start_s = kafka_run(broker, pristine, unclean=unclean, partitions=partitions)
                kafka_loads.append(load_s)
                kafka_starts.append(start_s)
                print(
                    f"{kind} run {n + 1}: Kafka loaded its logs in {load_s:.3f} s "
                    f"(launch to started {start_s:.1f} s)",
                    flush=True,
                )
            else:
                ours.append(
                    logcleaner_run(
                        pristine,
                        ours_dir,
                        unclean=unclean,
                        partitions=partitions,
                        recovery_threads=recovery_threads,
                    )
                )
                print(f"{kind} run {n + 1}: logcleaner ready in {ours[-1]:.3f} s", flush=True)
    return kafka_loads, kafka_starts, ours


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each side after each kind of stop")
    parser.add_argument("--topic-partitions", type=int, default=1000, help="partitions a topic")
    parser.add_argument("--records", type=int, default=3, help="records produced to every partition")
    parser.add_argument(
        "--recovery-threads", type=int, default=2, help="num.recovery.threads.per.data.dir of both sides"
    )
    parser.add_argument("--heap", default="2g", help="the broker's -Xms and -Xmx")
    parser.add_argument("--work-dir", type=Path, help="keep the built dir here for the next run")
    args = parser.parse_args()
    broker_module.START_TIMEOUT_S = 1800.0  # 10,000 partitions: minutes, not seconds, on 2 cores
    broker_module.STOP_TIMEOUT_S = 600.0
    distribution = load_distribution()
    sizes = topic_sizes(args.partitions, args.topic_partitions)
    with tempfile.TemporaryDirectory(prefix="bench-kafka-startup-") as scratch:
        work = args.work_dir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        pristine = work / f"pristine-{args.partitions}"
        home = work / "broker"
        properties = {"num.recovery.threads.per.data.dir": str(args.recovery_threads)}
        broker = KafkaBroker(distribution, home, properties, jvm_flags=kafka_jvm_flags(args.heap))
        if not pristine.exists():
            shutil.rmtree(broker.log_dir, ignore_errors=True)
            started = time.perf_counter()
            build(broker, sizes, args.records, pristine)
            elapsed = time.perf_counter() - started
            print(f"{args.partitions:,d} partitions built in {elapsed:.1f} s", flush=True)
        else:
            # The kept dir's meta.properties and metadata log name node 1 of this dir's cluster, which a new
            # broker (new ports only) serves as well.
            print(f"reusing {pristine}", flush=True)
        ours_dir = work / "logcleaner" / "data"
        ours_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            results = {
                kind: measure(
                    broker, pristine, ours_dir, kind, args.runs, args.partitions, args.recovery_threads
                )
                for kind in ("clean", "unclean")
            }
        finally:
            broker.stop(check=False)
            shutil.rmtree(broker.log_dir, ignore_errors=True)
            shutil.rmtree(ours_dir, ignore_errors=True)
    print(
        f"\n{args.partitions:,d} partitions, Kafka {distribution.version}, medians of {args.runs} runs, "
        f"{args.recovery_threads} recovery threads:"
    )
    for kind, (kafka_loads, kafka_starts, ours) in results.items():
        kafka_s, start_s, ours_s = (statistics.median(x) for x in (kafka_loads, kafka_starts, ours))
        print(
            f"  after {'an' if kind == 'unclean' else 'a'} {kind} stop: Kafka's log loading {kafka_s:.3f} s "
            f"(launch to started {start_s:.1f} s); logcleaner serve to /readyz {ours_s:.3f} s; "
            f"ratio logcleaner / Kafka {ours_s / kafka_s:.2f}"
        )


if __name__ == "__main__":
    main()

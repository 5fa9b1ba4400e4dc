"""A partition a real broker was moving between its log dirs when it stopped: neither replica is cleaned.

``kafka-reassign-partitions.sh --execute`` with a ``log_dirs`` entry starts the move: the broker creates
``t-0.<id>-future`` in the target dir and copies into it, throttled here to a byte a second so it stays under
way; the broker is then stopped. Kafka pauses the partition's cleaning until the future replica is promoted
(``ReplicaManager`` -> ``LogCleanerManager.abortAndPauseCleaning``); logcleaner's ``clean`` must leave both
replicas byte-identical, and ``explain`` say ``future-replica``. Once the broker finished the move, the
partition is cleaned again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kafka.broker import KafkaBroker, run_java_tool, write_log_config
from tests.kafka.clients import create_topic, produce
from tests.kafka.conftest import MakeBroker
from tests.kafka.distribution import find_main_class
from tests.kafka.run_logcleaner import logcleaner_json
from tests.kafka.workloads import SEGMENT_MS, keyed_chunks

pytestmark = pytest.mark.kafka

REASSIGN_CLASSES = (
    "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka.admin.ReassignPartitionsCommand",
)
TOPIC = "moving"


def files(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def move(broker: KafkaBroker, target: Path, *extra: str) -> None:
    """``kafka-reassign-partitions.sh --execute`` of ``moving-0`` into ``target`` (a dir of the broker)."""
    plan = broker.home / "move.json"
    partition = {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [str(target)]}
    plan.write_text(json.dumps({"version": 1, "partitions": [partition]}))
    main_class = find_main_class(broker.distribution.jars_dir, REASSIGN_CLASSES)
    tools = broker.home / "tools"  # its own log config: the broker's must stay as it is
    tools.mkdir(exist_ok=True)
    run_java_tool(
        broker.distribution,
        main_class,
        "--bootstrap-server",
        broker.bootstrap_servers,
        "--reassignment-json-file",
        str(plan),
        "--execute",
        *extra,
        log_config=write_log_config(broker.distribution, tools, tools / "tools.log"),
    )


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_partition_stopped_mid_move_is_not_cleaned_until_the_move_ends(
    make_broker: MakeBroker, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    broker = make_broker({"log.dirs": f"{first},{second}"})
    create_topic(
        broker.bootstrap_servers, TOPIC, config={"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS)}
    )
    produce(broker.bootstrap_servers, TOPIC, keyed_chunks(seed=7, chunks=5, records_per_chunk=200))
    [current] = [d for d in (first / f"{TOPIC}-0", second / f"{TOPIC}-0") if d.is_dir()]
    target = second if current.parent == first else first
    move(broker, target, "--replica-alter-log-dirs-throttle", "1")
    wait_for(lambda: any(target.glob(f"{TOPIC}-0.*-future")), "the broker to create the future replica")
    broker.stop()
    [future] = target.glob(f"{TOPIC}-0.*-future")
    before = files(current), files(future)
    options = ["--override", f"log.dirs={first},{second}", "--override", "log.cleaner.engine=in-process"]

    [partition] = logcleaner_json("explain", *options, "--topic", TOPIC)["partitions"]
    assert (partition["cleaner"]["would_clean"], partition["cleaner"]["reason"]) == (False, "future-replica")
    assert logcleaner_json("clean", *options)["cleaned"] == []
    assert (files(current), files(future)) == before, "neither replica may change while the move is under way"

    broker.start()  # without the throttle the broker finishes the move and promotes the future replica
    move(broker, target, "--replica-alter-log-dirs-throttle", "100000000")
    wait_for(lambda: (target / f"{TOPIC}-0").is_dir() and not current.exists(), "the move to finish", 120)
    broker.stop()
    cleaned = logcleaner_json("clean", *options)["cleaned"]
    assert [(c["topic"], c["partition"]) for c in cleaned] == [(TOPIC, 0)]

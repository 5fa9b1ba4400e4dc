"""After an unclean stop: logcleaner recovers a broker's dir, cuts each leader-epoch cache to its log end in
memory (Kafka's ``truncateFromEndAsyncFlush``) and writes the cut files in one batch, then the marker; the
broker starts on the result without recovering a log or complaining about a file, serves every record,
and takes new ones."""

from __future__ import annotations

import pytest

from service.storage.leader_epoch_checkpoint import (
    EpochEntry,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from tests.kafka.checks import assert_started_cleanly
from tests.kafka.clients import create_topic, produce, read_topic
from tests.kafka.conftest import MakeBroker
from tests.kafka.round_trip import differences
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json
from tests.kafka.workloads import keyed_chunks

pytestmark = pytest.mark.kafka

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def test_an_unclean_stop_recovered_by_logcleaner_and_the_broker_starts_on_it_cleanly(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker()
    create_topic(broker.bootstrap_servers, "after-crash")
    produce(broker.bootstrap_servers, "after-crash", keyed_chunks(seed=11), compression="zstd")
    before = read_topic(broker.bootstrap_servers, "after-crash")
    broker.stop()

    # An unclean stop that left an epoch entry past the log end (its batches never reached the disk).
    partition_dir = broker.log_dir / "after-crash-0"
    entries = read_leader_epoch_checkpoint(partition_dir)
    assert entries, "the broker wrote its leader epoch"
    log_end = before[-1].offset + 1
    write_leader_epoch_checkpoint(partition_dir, [*entries, EpochEntry(entries[-1].epoch + 3, log_end + 50)])
    (broker.log_dir / CLEAN_SHUTDOWN_FILE).unlink()

    assert logcleaner_json("retention", *log_dir_options(broker.log_dir))["deleted"] == []
    assert read_leader_epoch_checkpoint(partition_dir) == entries, "the stale entry is cut and written"
    assert (broker.log_dir / CLEAN_SHUTDOWN_FILE).exists()

    broker.start()
    assert_started_cleanly(broker)
    assert not differences(before, read_topic(broker.bootstrap_servers, "after-crash"))
    more = keyed_chunks(chunks=1, seed=12)
    produce(broker.bootstrap_servers, "after-crash", more)
    assert len(read_topic(broker.bootstrap_servers, "after-crash")) == len(before) + len(more[0])

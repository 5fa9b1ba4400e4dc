"""A consumer group's offset commits go from a real broker's ``__consumer_offsets`` through
``logcleaner clean`` and back: the group coordinator loads the compacted partitions and the group's
committed offsets are exactly what they were; a deleted group stays deleted."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from tests.kafka.checks import assert_started_cleanly
from tests.kafka.clients import QUIET, TIMEOUT_S, commit_rounds, committed_offsets, create_topic
from tests.kafka.conftest import MakeBroker
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json

pytestmark = pytest.mark.kafka

OFFSETS_TOPIC = "__consumer_offsets"
ROLL_MS = 300
"""The broker's ``log.roll.ms``: commits carry the coordinator's clock, so rounds ``ROLL_MS`` apart roll
``__consumer_offsets`` segments (its ``segment.bytes`` is 100 MiB)."""
TOPIC = "orders"
PARTITIONS = 3
ROUNDS = 8
PAUSE_MS = ROLL_MS * 6 // 5


def test_clean_compacts_consumer_offsets_and_the_group_keeps_its_committed_offsets(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker({"log.roll.ms": str(ROLL_MS)})
    create_topic(broker.bootstrap_servers, TOPIC, partitions=PARTITIONS)
    commit_rounds(broker.bootstrap_servers, "kept-group", TOPIC, PARTITIONS, ROUNDS, PAUSE_MS)
    commit_rounds(broker.bootstrap_servers, "deleted-group", TOPIC, PARTITIONS, 2, PAUSE_MS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **QUIET})
    for future in admin.delete_consumer_groups(["deleted-group"], request_timeout=TIMEOUT_S).values():
        future.result()
    # More commits, so the deletion's tombstones fall below the active segment.
    commit_rounds(broker.bootstrap_servers, "kept-group", TOPIC, PARTITIONS, 2, PAUSE_MS)
    kept = committed_offsets(broker.bootstrap_servers, "kept-group", TOPIC, PARTITIONS)
    assert kept == {p: 10 * (2 - 1) + p + 1 for p in range(PARTITIONS)}
    broker.stop()

    cleaned = logcleaner_json("clean", *log_dir_options(broker.log_dir))
    cleaned_offsets = [e for e in cleaned["cleaned"] if e["topic"] == OFFSETS_TOPIC]
    assert cleaned_offsets, cleaned
    assert all(e["stats"]["records_retained"] < e["stats"]["records_read"] for e in cleaned_offsets), cleaned

    broker.start()
    assert_started_cleanly(broker)
    assert committed_offsets(broker.bootstrap_servers, "kept-group", TOPIC, PARTITIONS) == kept
    gone = committed_offsets(broker.bootstrap_servers, "deleted-group", TOPIC, PARTITIONS)
    assert all(offset < 0 for offset in gone.values()), gone

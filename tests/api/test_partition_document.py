"""``GET /v1/topics/{t}/partitions/{p}`` stays right as the log changes: the core keeps each segment's record
count as it grows (each batch header read once), so after a produce, a roll, a retention pass and a cleaning
round the document must still say what the files hold, read afresh here."""

from __future__ import annotations

import os
from pathlib import Path

from service.storage.file_records import iter_file_batches
from service.storage.log_files import LOG_SUFFIX, base_offset_from_name
from tests.api.conftest import Served, string_record, unique_topic_name

TIMESTAMP_MS = 1_700_000_000_000


Segment = tuple[int, int, int, int | None]  # base offset, bytes, records, largest record timestamp


def on_disk(partition_dir: Path) -> list[Segment]:
    """Each live segment's figures, read from its ``.log`` file (no record timestamp: None)."""
    out = []
    for path in sorted(partition_dir.glob(f"*{LOG_SUFFIX}"), key=lambda p: base_offset_from_name(p.name)):
        size = path.stat().st_size
        fd = os.open(path, os.O_RDONLY)
        try:
            batches = list(iter_file_batches(fd, 0, size, path=str(path)))
        finally:
            os.close(fd)
        count = sum(b.records_count for b in batches)
        largest = max((b.max_timestamp for b in batches), default=-1)
        out.append((base_offset_from_name(path.name), size, count, largest if largest >= 0 else None))
    return out


def documented(served: Served, topic: str) -> list[Segment]:
    """The segments as the document lists them (a largest timestamp taken from the mtime: None)."""
    response = served.client.get(f"/v1/topics/{topic}/partitions/0")
    assert response.status_code == 200, response.text
    detail = response.json()
    assert detail["size_bytes"] == sum(s["size_bytes"] for s in detail["segments"])
    return [
        (
            s["base_offset"],
            s["size_bytes"],
            s["record_count"],
            s["largest_timestamp"] if s["largest_timestamp_source"] == "record" else None,
        )
        for s in detail["segments"]
    ]


def produce(served: Served, topic: str, keys: list[str], *, at: int = TIMESTAMP_MS) -> None:
    records = [string_record(k, f"value-of-{k}", timestamp=at + i) for i, k in enumerate(keys)]
    response = served.client.post(f"/v1/topics/{topic}/partitions/0/records", json={"records": records})
    assert response.status_code == 200, response.text


def test_the_document_follows_produce_roll_retention_and_cleaning(served: Served) -> None:
    topic = unique_topic_name("document")
    configs = {"segment.bytes": 300, "retention.ms": -1}
    assert served.client.post("/v1/topics", json={"name": topic, "configs": configs}).status_code == 201
    partition_dir = served.log_dir / f"{topic}-0"

    produce(served, topic, ["k0"], at=TIMESTAMP_MS)
    [(base, one_batch, records, largest)] = documented(served, topic)
    assert (base, records, largest) == (0, 1, TIMESTAMP_MS)
    produce(served, topic, ["k1"], at=TIMESTAMP_MS + 10)  # into the segment counted by the GET before
    assert documented(served, topic) == on_disk(partition_dir) == [(0, 2 * one_batch, 2, TIMESTAMP_MS + 10)]
    for i in range(2, 6):  # one batch a request: the segments roll every few batches
        produce(served, topic, [f"k{i % 3}"], at=TIMESTAMP_MS + 10 * i)
    first = documented(served, topic)
    assert len(first) > 1, "rolled"
    assert first == on_disk(partition_dir)
    assert sum(s[2] for s in first) == 6

    produce(served, topic, ["k0", "k1", "k2"], at=TIMESTAMP_MS + 100)  # three records in one batch
    grown = documented(served, topic)
    assert grown == on_disk(partition_dir) and sum(s[2] for s in grown) == 9
    assert grown[-1][2] > first[-1][2] or len(grown) > len(first)

    path = f"/v1/topics/{topic}/partitions/0/delete-records"
    assert served.client.post(path, json={"before_offset": 4}).status_code == 200
    retention = served.client.post("/v1/retention/run").json()
    assert any(d["topic"] == topic for d in retention["deleted"]), retention
    kept = documented(served, topic)
    assert kept == on_disk(partition_dir) and len(kept) < len(grown)
    assert kept[0][0] == grown[len(grown) - len(kept)][0], "the oldest segments went"

    patch = {"set": {"cleanup.policy": "compact"}}
    assert served.client.patch(f"/v1/topics/{topic}/configs", json=patch).status_code == 200
    for i in range(6):  # the same keys again, in segments that roll: the cleaner can drop the older ones
        produce(served, topic, [f"k{i % 3}"], at=TIMESTAMP_MS + 200 + i)
    before_cleaning = documented(served, topic)
    cleaned = served.client.post("/v1/cleaner/run", json={"topic": topic, "partition": 0})
    assert cleaned.status_code == 200, cleaned.text
    after = documented(served, topic)
    assert after == on_disk(partition_dir)
    assert sum(s[2] for s in after) < sum(s[2] for s in before_cleaning), "duplicates removed"
    assert documented(served, topic) == after, "a second GET reads the same"

"""``/v1/cleaner`` over HTTP: a forced cleaning round and the cleaner's status; uncleanable partitions
against a daemon with a real cleaner thread: ``GET /v1/cleaner``
lists one with its reason, since when, its attempts and next try; ``POST .../retry`` answers 202 and the
thread tries it at its next round (404 for a partition that is not uncleanable); ``/metrics`` counts it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import (
    Served,
    assert_problem,
    produce_one_by_one,
    serve_daemon,
    string_record,
    unique_topic_name,
)
from tests.api.metrics_helpers import Scrape
from tests.cleaner.helpers import flip_byte, wait_for

THREAD = {"log.cleaner.threads": "1", "log.cleaner.backoff.ms": "20"}


@pytest.fixture
def cleaning(tmp_path: Path) -> Iterator[Served]:
    with serve_daemon(tmp_path / "logs", THREAD) as served:
        yield served


def uncleanable(served: Served) -> list[dict[str, object]]:
    status = served.client.get("/v1/cleaner")
    assert status.status_code == 200, status.text
    entries = status.json()["uncleanable"]
    assert isinstance(entries, list)
    return entries


def compacted_topic(served: Served, name: str) -> Path:
    """A compacted topic of several segments that the cleaner leaves alone until its ratio is lowered."""
    configs = {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 1.0}
    created = served.client.post("/v1/topics", json={"name": name, "configs": configs})
    assert created.status_code == 201, created.text
    for r in range(8):  # two batches a segment: four segments
        records = [string_record(f"k{k}", f"v{r}-{k}") for k in range(30)]
        produced = served.client.post(f"/v1/topics/{name}/partitions/0/records", json={"records": records})
        assert produced.status_code == 200, produced.text
    return served.log_dir / f"{name}-0"


def set_ratio(served: Served, topic: str, ratio: float) -> None:
    patched = served.client.patch(
        f"/v1/topics/{topic}/configs", json={"set": {"min.cleanable.dirty.ratio": ratio}}
    )
    assert patched.status_code == 200, patched.text


def test_an_uncleanable_partition_is_listed_and_retried_on_request(cleaning: Served) -> None:
    partition_dir = compacted_topic(cleaning, "faulty")
    segments = sorted(partition_dir.glob("*.log"))
    assert len(segments) >= 3
    second_segment = segments[1]
    flip_byte(second_segment, 100)
    set_ratio(cleaning, "faulty", 0.1)
    wait_for(lambda: bool(uncleanable(cleaning)))
    (entry,) = uncleanable(cleaning)
    assert entry["topic"] == "faulty" and entry["partition"] == 0 and entry["attempts"] == 1
    assert str(entry["reason"]).startswith("CorruptDataError: ") and str(second_segment) in str(
        entry["reason"]
    )
    assert isinstance(entry["since"], str) and isinstance(entry["next_retry"], str)
    assert entry["since"].endswith("Z") and entry["next_retry"] > entry["since"]
    assert entry["next_retry_ms"] == entry["since_ms"] + 600_000  # type: ignore[operator]
    scrape = Scrape.parse(cleaning.client.get("/metrics").text)
    directory = str(cleaning.log_dir.resolve())
    assert (
        scrape.value("kafka_log_logcleanermanager_uncleanable_partitions_count", logDirectory=directory) == 1
    )
    assert scrape.value("logcleaner_cleaner_uncleanable_partitions_past_retry") == 0
    assert scrape.value("kafka_log_logcleaner_deadthreadcount") == 0

    flip_byte(second_segment, 100)  # repaired
    retried = cleaning.client.post("/v1/cleaner/uncleanable/faulty/0/retry")
    assert retried.status_code == 202, retried.text
    assert retried.json()["topic"] == "faulty" and retried.json()["next_retry_ms"] <= int(time.time() * 1000)

    def cleaned() -> bool:
        runs = cleaning.client.get("/v1/cleaner").json()["last_runs"]
        return any(run["topic"] == "faulty" for run in runs)

    wait_for(cleaned)  # by the thread at its next round: no restart
    assert uncleanable(cleaning) == []
    assert_problem(cleaning.client.post("/v1/cleaner/uncleanable/faulty/0/retry"), 404)


def test_a_retry_of_a_partition_that_is_not_uncleanable_is_404(cleaning: Served) -> None:
    compacted_topic(cleaning, "fine")
    body = assert_problem(cleaning.client.post("/v1/cleaner/uncleanable/fine/0/retry"), 404)
    assert "fine-0 is not uncleanable" in str(body["detail"])
    assert_problem(cleaning.client.post("/v1/cleaner/uncleanable/never-created/0/retry"), 404)
    assert_problem(cleaning.client.post("/v1/cleaner/uncleanable/fine/-1/retry"), 422, field="partition")
    assert_problem(cleaning.client.post("/v1/cleaner/uncleanable/a..b!/0/retry"), 422, field="topic")


def test_forced_cleaning_and_cleaner_status(served: Served) -> None:
    topic = unique_topic_name("clean")
    configs = {"cleanup.policy": "compact", "segment.bytes": 200}
    served.client.post("/v1/topics", json={"name": topic, "configs": configs})
    produce_one_by_one(served, topic, 9)
    cleaned = served.client.post("/v1/cleaner/run", json={"topic": topic, "partition": 0})
    assert cleaned.status_code == 200, cleaned.text
    (entry,) = cleaned.json()["cleaned"]
    assert {"topic", "partition", "first_dirty_offset", "end_offset", "stats"} <= entry.keys()
    assert entry["first_dirty_offset"] == 0 and entry["end_offset"] > 0
    checkpoint = served.client.get("/v1/checkpoints/cleaner-offset-checkpoint").json()["checkpoints"][0]
    assert {"topic": topic, "partition": 0, "offset": entry["end_offset"]} in checkpoint["entries"]
    status = served.client.get("/v1/cleaner")
    assert status.status_code == 200 and isinstance(status.json(), dict)

    assert_problem(
        served.client.post("/v1/cleaner/run", json={"topic": "never-created", "partition": 0}), 404
    )
    plain = unique_topic_name("plain")
    served.client.post("/v1/topics", json={"name": plain})
    assert_problem(served.client.post("/v1/cleaner/run", json={"topic": plain, "partition": 0}), 409)
    for bad, field in [
        ({"topic": topic}, "partition"),
        ({"topic": "a/b", "partition": 0}, "topic"),
        ({"topic": topic, "partition": -1}, "partition"),
    ]:
        assert_problem(served.client.post("/v1/cleaner/run", json=bad), 422, field=field)

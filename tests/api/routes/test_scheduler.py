"""``GET /v1/scheduler/jobs``: each scheduled task under Kafka's name, over HTTP."""

from __future__ import annotations

from tests.api.conftest import Served


def test_scheduler_jobs_have_kafkas_names(served: Served) -> None:
    jobs = {j["name"]: j for j in served.client.get("/v1/scheduler/jobs").json()["jobs"]}
    assert {"kafka-log-retention", "kafka-log-flusher", "kafka-recovery-point-checkpoint"} <= jobs.keys()
    retention = jobs["kafka-log-retention"]
    assert retention["period_ms"] == 300_000 and retention["runs"] == 0 and retention["next_run_ms"] > 0

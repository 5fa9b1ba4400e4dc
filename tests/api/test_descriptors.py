"""The daemon's read paths over more segments than its descriptor limit allows: the REST explain, the
partition view and fetch each give back every descriptor they open, and ``/metrics`` reports the count.

The daemon runs in this process (a real uvicorn server on a real port), so the lowered limit is its own.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import serve_daemon
from tests.service.descriptor_helpers import SEGMENTS_PER_PARTITION, fd_limit, many_segments, open_fds

PARTITIONS = 4
# Descriptors another thread of the daemon may hold for a moment (an accepted connection, a config
# read); a leak is one per sealed segment read, PARTITIONS * (SEGMENTS_PER_PARTITION - 1) a pass.
SLACK = 2


def test_rest_read_paths_give_back_their_descriptors(tmp_path: Path) -> None:
    log_dir = many_segments(tmp_path / "logs", partitions=PARTITIONS)
    with serve_daemon(log_dir) as served:
        client = served.client
        assert client.get("/readyz").status_code == 200  # the client's connection is open from here on
        start = open_fds()
        with fd_limit():
            for _ in range(3):  # a leak of one descriptor per sealed segment would pass the limit
                explained = client.get("/v1/retention/explain")
                assert explained.status_code == 200, explained.text
                partitions = explained.json()["partitions"]
                assert sum(len(p["segments"]) for p in partitions) == PARTITIONS * SEGMENTS_PER_PARTITION
                assert open_fds() <= start + SLACK
            for partition in range(PARTITIONS):
                view = client.get(f"/v1/topics/fds/partitions/{partition}")
                assert view.status_code == 200, view.text
                assert len(view.json()["segments"]) == SEGMENTS_PER_PARTITION
                fetched = client.get(
                    f"/v1/topics/fds/partitions/{partition}/records", params={"max_records": 1000}
                )
                assert fetched.status_code == 200, fetched.text
                assert len(fetched.json()["records"]) == 10 * SEGMENTS_PER_PARTITION
                assert open_fds() <= start + SLACK
            scrape = client.get("/metrics")
        assert scrape.status_code == 200
        samples = {
            sample.name: sample.value
            for family in text_string_to_metric_families(scrape.text)
            for sample in family.samples
        }
        assert 0 < samples["process_open_fds"] <= start + 1  # the scrape's own reading of /proc
        assert samples["process_max_fds"] > 0

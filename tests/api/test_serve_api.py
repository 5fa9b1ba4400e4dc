"""``logcleaner serve`` as a real subprocess serves the API, and SIGTERM stops it cleanly."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.service.serve_process import READY, Serve


@pytest.mark.slow
def test_serve_answers_on_the_logged_port_until_sigterm(tmp_path: Path) -> None:
    serve = Serve(tmp_path / "logs", "scheduler.initial.delay.ms=3600000", "log.cleaner.engine=in-process")
    serve.wait_for(READY)
    found = re.search(r"REST API listening on (http://127\.0\.0\.1:\d+)", serve.log)
    assert found, serve.log
    url = found.group(1)
    assert httpx.get(f"{url}/readyz").json() == {"status": "ready"}
    created = httpx.post(f"{url}/v1/topics", json={"name": "orders", "partitions": 2})
    assert created.status_code == 201, created.text
    assert (tmp_path / "logs" / "orders-1").is_dir()
    assert serve.stop() == 0, serve.log
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/healthz")

"""Fixtures for the API tests: a real daemon serving on a real uvicorn port, and an httpx client.

One daemon per session serves most tests; each test works on its own topics (``topic`` fixture), so
tests do not see each other's data. Scheduled tasks wait an hour and the cleaner has no threads of its
own (``log.cleaner.threads=0``: forced cleanings still run), so nothing changes the logs unless a test
asks. ``disk_snapshot`` takes the listing and bytes of a log dir, to show that a refused request
changed nothing.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from api.server import ApiServer
from service.config.broker_config import BrokerConfig
from service.shell.daemon import Daemon

QUIET_DAEMON = {
    "api.port": "0",
    "scheduler.initial.delay.ms": "3600000",
    "log.cleaner.engine": "in-process",
    "log.cleaner.threads": "0",
}


@dataclass
class Served:
    daemon: Daemon
    client: httpx.Client
    log_dir: Path

    @property
    def port(self) -> int:
        server = self.daemon.api_server
        if server is None or server.port is None:
            raise RuntimeError("the daemon has no API server")
        return server.port


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_daemon(tmp_path_factory.mktemp("logs")) as s:
        yield s


@contextmanager
def serve_daemon(log_dir: Path, overrides: Mapping[str, str] | None = None) -> Iterator[Served]:
    """A started daemon on ``log_dir`` (``QUIET_DAEMON`` plus ``overrides``) and a client for its API."""
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(log_dir), **QUIET_DAEMON, **(overrides or {})})
    daemon = Daemon(broker)
    daemon.start()
    try:
        server = daemon.api_server
        if server is None:
            raise RuntimeError("the daemon started without its API server")
        with httpx.Client(base_url=server.url, timeout=60) as client:
            yield Served(daemon, client, log_dir)
    finally:
        daemon.shutdown()


_names = itertools.count()


@pytest.fixture
def topic(served: Served, request: pytest.FixtureRequest) -> str:
    """A fresh one-partition topic, named after the test."""
    name = unique_topic_name(request.node.name)
    response = served.client.post("/v1/topics", json={"name": name, "partitions": 1})
    assert response.status_code == 201, response.text
    return name


def unstarted_daemon(log_dir: Path) -> Daemon:
    """A quiet daemon over ``log_dir`` that is never started: its logs are not loaded."""
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(log_dir), **QUIET_DAEMON})
    return Daemon(broker)


@contextmanager
def running(server: ApiServer) -> Iterator[httpx.Client]:
    """``server`` started, with a client on its URL; stopped after."""
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client
    finally:
        server.stop()


def unique_topic_name(hint: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in hint)[:60]
    return f"{cleaned}-{next(_names)}"


def disk_snapshot(log_dir: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``log_dir``: size, and a hash of the bytes of logs and checkpoints.

    Pending deletions (``.deleted`` files, ``-delete`` dirs) are left out: the session's daemon removes
    those of earlier tests on its own delay (``file.delete.delay.ms``), at any moment of a later test.
    """
    out: dict[str, tuple[int, str]] = {}
    for path in sorted(log_dir.rglob("*")):
        relative = path.relative_to(log_dir)
        if relative.parts[0].endswith("-delete") or path.name.endswith(".deleted"):
            continue
        if path.is_file():
            digest = ""
            if not path.name.endswith((".index", ".timeindex")):  # large, sparse, preallocated
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(relative)] = (path.stat().st_size, digest)
    return out


def assert_problem(response: httpx.Response, status: int, *, field: str | None = None) -> dict[str, object]:
    """A problem+json answer with ``status`` (and, for a 422, an error naming ``field``)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json", response.headers
    body = response.json()
    assert isinstance(body, dict)
    assert {"type", "title", "status", "detail"} <= body.keys(), body
    assert body["status"] == status and isinstance(body["detail"], str) and body["detail"]
    if field is not None:
        errors = body.get("errors")
        assert isinstance(errors, list) and any(e["field"] == field for e in errors), body
        assert field in body["detail"], body
    return body


def string_record(key: str | None, value: str | None, **extra: object) -> dict[str, object]:
    record: dict[str, object] = {
        "key": None if key is None else {"type": "STRING", "data": key},
        "value": None if value is None else {"type": "STRING", "data": value},
    }
    record.update(extra)
    return record


def produce_one_by_one(served: Served, topic: str, count: int, *, timestamp: int | None = None) -> None:
    """``count`` produces of one record each (keys ``k0``..``k2`` in turn) to partition 0 of ``topic``."""
    for i in range(count):
        extra = {} if timestamp is None else {"timestamp": timestamp}
        record = string_record(f"k{i % 3}", f"value-{i}", **extra)
        response = served.client.post(f"/v1/topics/{topic}/partitions/0/records", json={"records": [record]})
        assert response.status_code == 200, response.text

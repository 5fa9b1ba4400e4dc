"""``ApiServer``: binds where asked (port 0: any free port), answers while long work runs, stops in bounded
time; readiness before the logs are loaded."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from api.deps import ApiSettings, JobsView
from api.server import ApiServer
from service.config.broker_config import BrokerConfig
from service.core.ports import CleanerFigures, CleanerView, LogQueries, SummaryView
from service.shell.daemon import Daemon
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, assert_problem, running, string_record, unstarted_daemon


def settings_of(broker: BrokerConfig) -> ApiSettings:
    """The ``api.*`` settings the composition root builds (no token file here)."""
    return ApiSettings.from_broker(broker, auth_token=None)


def test_port_zero_takes_a_free_port_and_says_which(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    daemon = unstarted_daemon(tmp_path)
    app = create_app(daemon.view, daemon.metrics_registry, settings=settings_of(daemon.broker))
    server = ApiServer(app, host="127.0.0.1", port=0)
    with caplog.at_level(logging.INFO, logger="api.server"), running(server) as client:
        assert server.port is not None and server.port > 0
        assert f"REST API listening on http://127.0.0.1:{server.port}" in caplog.text
        assert client.get("/healthz").json() == {"status": "ok"}
        body = assert_problem(client.get("/readyz"), 503)  # the daemon never loaded its logs
        assert "not loaded" in str(body["detail"])
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=5)


def test_a_port_in_use_fails_start_naming_the_key(tmp_path: Path) -> None:
    daemon = unstarted_daemon(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = create_app(daemon.view, daemon.metrics_registry, settings=settings_of(daemon.broker))
        server = ApiServer(app, host="127.0.0.1", port=port)
        with pytest.raises(OSError, match=rf"127\.0\.0\.1:{port} \(api\.host, api\.port\)") as raised:
            server.start()
        assert f"by {Path(sys.executable).name} (pid {os.getpid()}" in str(raised.value), "who holds it"


class BlockingCleaner:
    """A ``CleanerView`` whose forced cleaning waits until the test releases it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def figures(self) -> CleanerFigures:
        raise NotImplementedError

    def status(self) -> dict[str, object]:
        return {"threads": []}

    def clean_partition(self, tp: TopicPartition) -> dict[str, object]:
        self.entered.set()
        self.release.wait(30)
        return {
            "topic": tp.topic,
            "partition": tp.partition,
            "first_dirty_offset": 0,
            "end_offset": 0,
            "stats": {},
        }

    def retry_uncleanable(self, tp: TopicPartition) -> dict[str, object]:
        raise NotImplementedError


class WithCleaner:
    """The served node's surface (its ``NodeView``), with another cleaner."""

    def __init__(self, daemon: Daemon, cleaner: CleanerView) -> None:
        self.view = daemon.view
        self.cleaner_view = cleaner
        self.broker: BrokerConfig = daemon.view.broker
        self.logs: LogQueries = daemon.view.logs
        self.scheduler: JobsView = daemon.view.scheduler
        self.explain_summary: SummaryView = daemon.view.summary


def test_long_work_does_not_block_other_requests(served: Served, topic: str) -> None:
    cleaner = BlockingCleaner()
    service = WithCleaner(served.daemon, cleaner)
    app = create_app(service, served.daemon.metrics_registry, settings=settings_of(served.daemon.broker))
    server = ApiServer(app, port=0)
    with running(server) as client:
        answers: list[httpx.Response] = []
        slow = threading.Thread(
            target=lambda: answers.append(
                client.post("/v1/cleaner/run", json={"topic": topic, "partition": 0})
            )
        )
        slow.start()
        try:
            assert cleaner.entered.wait(10)
            started = time.monotonic()
            assert client.get("/healthz").status_code == 200
            assert client.get("/v1/topics").status_code == 200
            produced = client.post(
                f"/v1/topics/{topic}/partitions/0/records", json={"records": [string_record("k", "v")]}
            )
            assert produced.status_code == 200
            assert client.get(f"/v1/topics/{topic}/partitions/0/records").status_code == 200
            assert time.monotonic() - started < 5
            assert not answers, "the cleaning is still running"
        finally:
            cleaner.release.set()
            slow.join(10)
        assert answers[0].status_code == 200 and answers[0].json()["cleaned"][0]["topic"] == topic


def test_stop_is_bounded_while_a_request_hangs(served: Served, topic: str) -> None:
    cleaner = BlockingCleaner()
    service = WithCleaner(served.daemon, cleaner)
    app = create_app(service, served.daemon.metrics_registry, settings=settings_of(served.daemon.broker))
    server = ApiServer(app, port=0, graceful_timeout_s=1)
    server.start()
    client = httpx.Client(base_url=server.url, timeout=30)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client.post("/v1/cleaner/run", json={"topic": topic, "partition": 0})
        except httpx.HTTPError as exc:
            errors.append(exc)

    hanging = threading.Thread(target=call)
    hanging.start()
    try:
        assert cleaner.entered.wait(10)
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 4
    finally:
        cleaner.release.set()
        hanging.join(10)
        client.close()

"""``/docs`` works without the internet: the page names no URL outside this server, every file it loads is
served here (Swagger UI's, from the fastapi-offline package), and a real headless Chromium with no route
beyond loopback renders the API's operations from it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import fastapi_offline

from api.app import DOCS_ASSETS_PATH
from tests.api.conftest import Served

_URL = re.compile(r"https?://[^\s\"'<>()]+")


class _AssetLinks(HTMLParser):
    """The ``src`` and ``href`` attributes of a page, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs if name in ("src", "href") and value]


def _asset_links(page: str) -> list[str]:
    parser = _AssetLinks()
    parser.feed(page)
    return parser.links


def test_the_page_names_no_url_outside_this_server(served: Served) -> None:
    page = served.client.get("/docs")
    assert page.status_code == 200 and "SwaggerUIBundle" in page.text
    outside = [url for url in _URL.findall(page.text) if urlsplit(url).hostname != "127.0.0.1"]
    assert outside == []
    assert "'/openapi.json'" in page.text
    assert '"validatorUrl": null' in page.text, "no validator badge fetched from swagger.io"


def test_every_file_the_page_loads_is_served_here(served: Served) -> None:
    links = _asset_links(served.client.get("/docs").text)
    assert sorted(links) == sorted(
        f"{DOCS_ASSETS_PATH}/{name}" for name in ("swagger-ui.css", "favicon.png", "swagger-ui-bundle.js")
    )
    package_files = Path(fastapi_offline.__file__).parent / "static"
    for link in links:
        answer = served.client.get(link)
        assert answer.status_code == 200, link
        assert answer.content == (package_files / link.rsplit("/", 1)[1]).read_bytes(), link
    assert served.client.get("/docs/oauth2-redirect").status_code == 200
    assert served.client.get("/redoc").status_code == 404, "ReDoc, which would load a CDN's script, is off"


def test_a_headless_browser_without_a_network_renders_the_operations(served: Served, tmp_path: Path) -> None:
    """Chromium resolves no name (every host but 127.0.0.1 is NOTFOUND) and sends anything else to a closed
    proxy port, so only this server answers; its net log shows what the page asked for."""
    chromium = shutil.which("chromium")
    assert chromium is not None, "Debian's chromium package is installed (the README's test command)"
    origin = f"http://127.0.0.1:{served.port}"
    net_log = tmp_path / "net-log.json"
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--proxy-server=http://127.0.0.1:9",
            f"--log-net-log={net_log}",
            "--virtual-time-budget=20000",
            "--dump-dom",
            f"{origin}/docs",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rendered_paths = set(re.findall(r'data-path="([^"]+)"', done.stdout))
    document = served.client.get("/openapi.json").json()
    assert rendered_paths == set(document["paths"]), "every operation's path is on the page"
    assert {"/v1/topics", "/v1/topics/{topic}/partitions/{partition}/records", "/metrics"} <= rendered_paths
    asked = _urls_the_page_asked_for(net_log, origin)
    assert {
        f"{DOCS_ASSETS_PATH}/swagger-ui-bundle.js",
        f"{DOCS_ASSETS_PATH}/swagger-ui.css",
        "/openapi.json",
    } <= {urlsplit(url).path for url in asked}
    assert [url for url in asked if not url.startswith(f"{origin}/")] == []


def _urls_the_page_asked_for(net_log: Path, origin: str) -> list[str]:
    """The URLs of the requests the page started (its origin is their initiator); Chromium's own requests
    (component updates and the like, all refused here) have none."""
    log = json.loads(net_log.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        event["params"]["url"]
        for event in log["events"]
        if event["type"] == start_job and event.get("params", {}).get("initiator") == origin
    ]

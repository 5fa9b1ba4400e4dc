"""``serve`` refuses to listen beyond loopback without a token unless ``api.auth.allow.anonymous=true``:
exit 2 with one line naming the keys, before it binds or touches a log dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.config.broker_config import BrokerConfig
from service.config.definitions import InvalidConfigError
from service.config.listen_policy import check_listen_policy, is_loopback_host
from service.shell.daemon import Daemon
from tests.paths import REPO


def serve(log_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "service", "serve", "--override", f"log.dirs={log_dir}"]
    for override in ("api.port=0", *overrides):
        args += ["--override", override]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1"])
def test_serve_beyond_loopback_without_a_token_exits_2_before_touching_the_logs(
    tmp_path: Path, host: str
) -> None:
    log_dir = tmp_path / "logs"
    result = serve(log_dir, f"api.host={host}")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"api.host={host}" in line and "beyond loopback" in line
    assert "api.auth.token.file" in line and "api.auth.allow.anonymous=true" in line
    assert not log_dir.exists()


def test_a_malformed_allowed_origin_is_invalid_configuration(tmp_path: Path) -> None:
    result = serve(tmp_path / "logs", "api.allowed.origins=https://ok.example,ui.example")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "api.allowed.origins" in line and "'ui.example'" in line


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.2", False),
        ("example.com", False),
        ("localhost.example", False),
    ],
)
def test_loopback_hosts(host: str, expected: bool) -> None:
    assert is_loopback_host(host) is expected


def config(**overrides: str) -> BrokerConfig:
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in overrides.items()})[0]


def test_a_token_or_an_explicit_anonymous_allows_listening_beyond_loopback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        check_listen_policy(config(api_host="0.0.0.0"))
    assert refused.value.name == "api.host"
    check_listen_policy(config(api_host="0.0.0.0", api_auth_token_file=str(tmp_path / "token")))
    check_listen_policy(config(api_host="localhost"))
    assert not caplog.records
    check_listen_policy(config(api_host="0.0.0.0", api_auth_allow_anonymous="true"))
    [warning] = caplog.records
    assert warning.levelname == "WARNING" and "without authentication" in warning.getMessage()


def test_the_daemon_serves_on_a_wildcard_address_with_a_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0k3n\n", encoding="utf-8")
    broker, _ = BrokerConfig.from_properties(
        {
            "log.dirs": str(tmp_path / "logs"),
            "api.host": "0.0.0.0",
            "api.port": "0",
            "api.auth.token.file": str(token),
            "scheduler.initial.delay.ms": "3600000",
            "log.cleaner.enable": "false",
        }
    )
    daemon = Daemon(broker)
    daemon.start()
    try:
        assert daemon.api_server is not None
        url = f"http://127.0.0.1:{daemon.api_server.port}"
        assert httpx.get(f"{url}/v1/topics").status_code == 401
        answer = httpx.get(f"{url}/v1/topics", headers={"Authorization": "Bearer t0k3n"})
        assert answer.status_code == 200
    finally:
        daemon.shutdown()

"""``api.deps``: the API's settings are the broker config's ``api.*`` keys (and the token the composition
root read), nothing else; the routes' context and aliases are exercised by every route test."""

from __future__ import annotations

from pathlib import Path

from api.deps import ApiSettings
from service.config.broker_config import BrokerConfig


def test_the_settings_are_the_broker_configs_api_keys(tmp_path: Path) -> None:
    broker, _ = BrokerConfig.from_properties(
        {
            "log.dirs": str(tmp_path),
            "api.host": "0.0.0.0",
            "api.allowed.hosts": "logcleaner, logs.example",
            "api.allowed.origins": "https://ui.example",
            "api.max.request.bytes": "4096",
            "api.max.records.per.request": "5",
            "api.max.fetch.records": "10",
            "api.max.fetch.bytes": "100",
        }
    )

    settings = ApiSettings.from_broker(broker, auth_token="secret")

    assert settings == ApiSettings(
        max_request_bytes=4096,
        max_records_per_request=5,
        max_fetch_records=10,
        max_fetch_bytes=100,
        auth_token="secret",
        bound_host="0.0.0.0",
        allowed_hosts=("logcleaner", "logs.example"),
        allowed_origins=("https://ui.example",),
    )


def test_the_defaults_are_the_broker_configs_defaults(tmp_path: Path) -> None:
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(tmp_path)})

    assert ApiSettings.from_broker(broker, auth_token=None) == ApiSettings()

"""The Grafana dashboard and its provisioning: the JSON parses, every query reads metrics the service
exports, and the provisioning points Grafana at the compose file's Prometheus and at the dashboard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.deploy.deploy_files import DEPLOY, PROMETHEUS_SERIES, load_yaml
from tests.deploy.promql import label_values_metric, metric_names

GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "logcleaner.json"


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def test_every_query_reads_metrics_the_service_exports(exported_names: set[str]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    used: dict[str, set[str]] = {}
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            used[f"{panel['title']} ({target['refId']})"] = metric_names(target["expr"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            metric = label_values_metric(variable["query"]["query"])
            assert metric is not None, variable
            used[f"${variable['name']}"] = {metric}

    assert len(used) >= 20 and all(used.values()), used
    unknown = {where: names - exported_names - PROMETHEUS_SERIES for where, names in used.items()}
    assert {where: names for where, names in unknown.items() if names} == {}
    every_family = {name.removesuffix("_bucket") for names in used.values() for name in names}
    assert "logcleaner_retention_future_timestamp_segments" in every_family
    assert "kafka_log_logcleanermanager_max_dirty_percent" in every_family


def test_the_dashboard_is_well_formed() -> None:
    dashboard = json.loads(DASHBOARD.read_text())

    assert dashboard["uid"] == "logcleaner" and dashboard["title"]
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in panels(dashboard):
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert {"h", "w", "x", "y"} <= panel["gridPos"].keys()
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]


def test_provisioning_points_at_prometheus_and_the_dashboard() -> None:
    [source] = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")["datasources"]
    [provider] = load_yaml(GRAFANA / "provisioning" / "dashboards" / "logcleaner.yml")["providers"]
    compose = load_yaml(DEPLOY / "compose.yaml")

    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    assert "prometheus" in compose["services"]
    mounts = dict(volume.split(":")[:2] for volume in compose["services"]["grafana"]["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"

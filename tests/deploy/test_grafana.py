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
    assert every_family >= {
        "logcleaner_retention_future_timestamp_segments",
        "logcleaner_partition_offline",
        # per-round figures that move while the cleaner works
        "logcleaner_cleaner_rounds_total",
        "logcleaner_cleaner_round_duration_seconds",
        "logcleaner_cleaner_bytes_read_total",
        "logcleaner_cleaner_compaction_delay_seconds",
    }


def test_queries_pick_this_services_instances_and_name_the_task_label() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in panels(dashboard) for t in panel.get("targets", [])]
    [instance] = [v for v in dashboard["templating"]["list"] if v["name"] == "instance"]

    # brokers export kafka_log_* too: the instances are those exporting logcleaner_build_info, and "All"
    # means those (no ".*", which would match a broker's series)
    assert label_values_metric(instance["query"]["query"]) == "logcleaner_build_info"
    assert all(v.get("allValue") in (None, "") for v in dashboard["templating"]["list"])
    assert all('instance=~"$instance"' in expr for expr in exprs), "every query filters by instance"
    assert not any("exported_job" in expr for expr in exprs)
    task_panels = [t for p in panels(dashboard) for t in p.get("targets", []) if "scheduler_job" in t["expr"]]
    assert task_panels and all("task" in t["expr"] and "{{task}}" in t["legendFormat"] for t in task_panels)


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
    scrape_interval = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["global"]["scrape_interval"]
    assert source["jsonData"]["timeInterval"] == scrape_interval  # so that $__rate_interval is right
    assert "prometheus" in compose["services"]
    mounts = dict(volume.split(":")[:2] for volume in compose["services"]["grafana"]["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"

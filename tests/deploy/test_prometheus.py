"""The Prometheus scrape config and alert rules: promtool accepts them, the alerts' unit tests pass (among
them: a broker's series of the same names fire nothing), every metric an alert reads is one the service
exports, and every rule picks this service's targets the same way, never by a scrape job's name."""

from __future__ import annotations

import re
from pathlib import Path

from tests.api.metrics_helpers import promtool
from tests.deploy.deploy_files import DEPLOY, PROMETHEUS_SERIES, load_yaml
from tests.deploy.promql import metric_names

PROMETHEUS = DEPLOY / "prometheus"
ALERTS_WE_PROMISE = {
    "LogCleanerDown",
    "LogCleanerThreadDead",
    "LogCleanerThreadRestarted",
    "LogCleanerUncleanablePastRetry",
    "LogCleanerUncleanablePartitions",
    "LogCleanerCompactionLate",
    "RetentionHeldBackByFutureTimestamps",
    "LogDirectoryOffline",
    "ScheduledTaskFailing",
    "CompactionReclaimableWhileCleanerIdle",
}


def check(*args: str) -> None:
    result = promtool(*args)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_accepts_the_scrape_config_and_its_rules() -> None:
    check("check", "config", "--lint=all", "--lint-fatal", str(PROMETHEUS / "prometheus.yml"))


def test_promtool_accepts_the_rules() -> None:
    check("check", "rules", "--lint=all", "--lint-fatal", str(PROMETHEUS / "alerts.yml"))


def test_the_alerts_unit_tests_pass() -> None:
    check("test", "rules", str(PROMETHEUS / "alerts.test.yml"))


def alert_rules() -> dict[str, str]:
    document = load_yaml(PROMETHEUS / "alerts.yml")
    return {rule["alert"]: rule["expr"] for group in document["groups"] for rule in group["rules"]}


def test_the_promised_alerts_exist_on_exported_metrics(exported_names: set[str]) -> None:
    rules = alert_rules()

    assert rules.keys() >= ALERTS_WE_PROMISE
    for name, expr in rules.items():
        unknown = metric_names(expr) - exported_names - PROMETHEUS_SERIES
        assert not unknown, f"{name} reads metrics the service does not export: {unknown}"


def test_every_rule_selects_this_services_targets_by_its_build_info_not_by_job() -> None:
    rules = alert_rules()
    join = re.compile(r"and on \(job, instance\) (?:last_over_time\()?logcleaner_build_info\b")

    assert "LogCleanerMaxDirtyPercentHigh" not in rules  # replaced: a dirty share is not lateness
    for name, expr in rules.items():
        assert len(join.findall(expr)) == 1, f"{name} does not keep to logcleaner_build_info's targets"
        assert re.match(r"\s*max without \(job\) \(", expr), f"{name} fires once per scrape job"
        assert not re.search(r"\bjob\s*=", expr), f"{name} names a scrape job"
        assert "exported_job" not in expr, name


def test_the_scrape_config_scrapes_the_compose_service() -> None:
    config = load_yaml(PROMETHEUS / "prometheus.yml")
    [job] = config["scrape_configs"]

    assert job["job_name"] == "logcleaner" and job.get("metrics_path", "/metrics") == "/metrics"
    assert job["static_configs"][0]["targets"] == ["logcleaner:8080"]
    for rule_file in config["rule_files"]:
        assert Path(PROMETHEUS / rule_file).is_file(), rule_file

"""The container image definition, the compose file and the example configurations, checked without
Docker (CI has none): what the Dockerfile declares, that every file they name exists, and that each
configuration loads as ``logcleaner serve --config`` loads it, without a warning."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from api.network_guards import host_name
from service.config.listen_policy import check_listen_policy, is_loopback_host
from tests.deploy.deploy_files import DEPLOY, broker_config, load_yaml

REPO = DEPLOY.parent
CONTAINER_CONFIG = "/etc/logcleaner/server.properties"


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    joined = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def only(keyword: str) -> list[str]:
    return [rest for kw, rest in instructions() if kw == keyword]


def test_the_image_runs_the_daemon_as_a_non_root_user_with_java_17() -> None:
    steps = instructions()

    assert all(base.startswith("python:3.11-slim") for base in (r.split()[0] for r in only("FROM")))
    assert any("openjdk-17-jre-headless" in run for run in only("RUN"))
    users = only("USER")
    assert users and users[-1] not in ("root", "0")
    keywords = [kw for kw, _ in steps]
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    command = [*shlex.split(only("ENTRYPOINT")[0].strip("[]").replace(",", " "))]
    command += shlex.split(only("CMD")[0].strip("[]").replace(",", " "))
    assert command[command.index("logcleaner") :] == ["logcleaner", "serve", "--config", CONTAINER_CONFIG]
    assert only("EXPOSE") == ["8080"]
    [healthcheck] = only("HEALTHCHECK")
    assert "http://127.0.0.1:8080/healthz" in healthcheck


def test_the_containers_config_listens_everywhere_and_keeps_logs_on_the_volume() -> None:
    config = DEPLOY / "container" / "server.properties"
    broker, warnings = broker_config(config)

    assert warnings == []
    assert broker.api_host == "0.0.0.0" and str(broker.api_port) == only("EXPOSE")[0]
    volumes = [Path(v) for v in shlex.split(only("VOLUME")[0].strip("[]").replace(",", " "))]
    assert all(any(Path(d).is_relative_to(v) for v in volumes) for d in broker.log_dirs), broker.log_dirs
    copies = [rest.split() for rest in only("COPY") if not rest.startswith("--from")]
    assert ["deploy/container/server.properties", CONTAINER_CONFIG] in copies
    for *sources, _ in copies:
        for source in sources:
            assert (REPO / source).exists(), source


def test_the_compose_file_runs_the_service_prometheus_and_grafana() -> None:
    compose = load_yaml(DEPLOY / "compose.yaml")
    services = compose["services"]

    assert set(services) == {"logcleaner", "prometheus", "grafana"}
    build = services["logcleaner"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == (DEPLOY / "Dockerfile").resolve()
    assert "8080:8080" in services["logcleaner"]["ports"]
    grace = services["logcleaner"]["stop_grace_period"]
    assert grace.endswith("s")
    broker, _ = broker_config(DEPLOY / "container" / "server.properties")
    assert int(grace[:-1]) * 1000 > broker.shutdown_timeout_ms  # the stop's own bound comes first
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source}"
            else:
                assert source in compose["volumes"], f"{name}: {source}"
    mounts = dict(v.split(":")[:2] for v in services["prometheus"]["volumes"])
    rule_files = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["rule_files"]
    assert mounts["./prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    for rule_file in rule_files:
        assert f"/etc/prometheus/{rule_file}" in mounts.values(), rule_file


def test_the_container_listens_beyond_loopback_only_with_a_token_from_a_compose_secret() -> None:
    broker, _ = broker_config(DEPLOY / "container" / "server.properties")
    compose = load_yaml(DEPLOY / "compose.yaml")

    assert not is_loopback_host(broker.api_host) and not broker.api_auth_allow_anonymous
    check_listen_policy(broker)  # serve starts: the token file is set
    [secret] = compose["services"]["logcleaner"]["secrets"]
    assert broker.api_auth_token_file == f"/run/secrets/{secret}"
    source = compose["secrets"][secret]["file"]
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert "/" + str((DEPLOY / source).resolve().relative_to(REPO)) in ignored, "a token is never committed"
    [target] = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["scrape_configs"][0]["static_configs"][0][
        "targets"
    ]
    assert host_name(target) in broker.api_allowed_hosts, "Prometheus's Host header is accepted"


def test_the_example_configurations_load_without_a_warning() -> None:
    example, example_warnings = broker_config(DEPLOY / "config" / "server.properties")
    spark, spark_warnings = broker_config(DEPLOY / "spark" / "server.properties")

    assert example_warnings == [] and spark_warnings == []
    assert example.api_host == "127.0.0.1" and example.spark_conf["spark.master"] == "local[*]"
    assert spark.spark_conf["spark.master"] == "spark://127.0.0.1:7077"
    assert spark.log_cleaner_engine == "spark"


def test_the_standalone_spark_script_is_valid_shell() -> None:
    script = DEPLOY / "spark" / "standalone.sh"

    assert script.stat().st_mode & 0o111, "executable"
    result = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    usage = subprocess.run([str(script)], capture_output=True, text=True, check=False, timeout=60)
    assert usage.returncode == 2 and "usage" in usage.stderr

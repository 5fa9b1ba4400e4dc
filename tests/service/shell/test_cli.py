"""The offline commands and the configuration errors users meet first (exit code 2 and a
message naming the key, the value and what is allowed)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from service.shell.cli import main
from tests.paths import REPO
from tests.service.cli_logs import DAY_MS, make_logs
from tests.service.cli_process import logcleaner


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("log.segment.bytes=13", ["log.segment.bytes", "13", "14"]),
        ("log.retention.ms=soon", ["log.retention.ms", "soon"]),
        ("log.cleanup.policy=shred", ["log.cleanup.policy", "shred", "compact"]),
        ("log.cleaner.enable=maybe", ["log.cleaner.enable", "maybe"]),
        ("log.cleaner.min.cleanable.ratio=1.5", ["log.cleaner.min.cleanable.ratio", "1.5"]),
        ("api.port=70000", ["api.port", "70000"]),
        ("log.retention.ms=" + "1" * 4301, ["log.retention.ms", "out of the range of Kafka's LONG type"]),
        ("log.segment.bytes=2147483648", ["log.segment.bytes", "INT", "[14, 2147483647]"]),
        ("log.cleaner.min.cleanable.ratio=" + "9" * 400, ["log.cleaner.min.cleanable.ratio", "DOUBLE"]),
        ("api.allowed.origins=ui.example", ["api.allowed.origins", "scheme://host"]),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else None,
)
def test_invalid_values_stop_with_exit_code_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, override: str, expected: list[str]
) -> None:
    code, out, err = run(capsys, "retention", "--override", f"log.dirs={tmp_path}", "--override", override)
    assert code == 2
    assert out == ""
    line = err.strip().splitlines()[-1]
    assert line.startswith("logcleaner: error:")
    for word in expected:
        assert word in line


def test_a_missing_config_file_is_bad_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "explain", "--config", str(tmp_path / "absent.properties"))
    assert code == 2
    assert "absent.properties" in err


def test_a_malformed_override_is_bad_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "retention", "--override", "log.dirs")
    assert code == 2
    assert "key=value" in err


def test_unknown_keys_warn_and_the_command_goes_on(tmp_path: Path) -> None:
    proc = logcleaner(
        "retention",
        "--json",
        "--override",
        f"log.dirs={tmp_path}",
        "--override",
        "broker.id=7",
        "--override",
        "log.retention.hourz=1",
        "--override",
        "bogus.key=1",
    )
    assert proc.returncode == 0, proc.stderr
    misspelt, bogus = proc.stderr.splitlines()  # broker.id is Kafka's: read quietly
    assert "WARNING" in bogus and bogus.endswith("unknown config key 'bogus.key' ignored")
    assert misspelt.endswith(
        "unknown config key 'log.retention.hourz' ignored: did you mean log.retention.hours?"
    )
    assert json.loads(proc.stdout) == {"dry_run": False, "deleted": []}


def test_serve_with_a_bad_config_exits_2_before_loading(tmp_path: Path) -> None:
    proc = logcleaner(
        "serve", "--override", f"log.dirs={tmp_path}", "--override", "log.retention.check.interval.ms=0"
    )
    assert proc.returncode == 2
    assert "log.retention.check.interval.ms" in proc.stderr
    assert not (tmp_path / ".lock").exists(), "nothing was touched"


def test_config_file_in_server_properties_syntax(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    make_logs(log_dir, age_ms=3 * DAY_MS)
    config = tmp_path / "server.properties"
    config.write_text(
        "# a comment\n! another\n"
        f"log.dirs = {log_dir}\n"
        "log.retention.hours: 48\n"
        "log.segment.delete.delay.ms=\\\n  0\n",
        encoding="latin-1",
    )
    code, out, err = run(capsys, "retention", "--config", str(config), "--dry-run", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] is True
    assert {d["reason"] for d in doc["deleted"]} == {"time"}
    assert len(list((log_dir / "t-0").glob("*.log"))) > 1, "a dry run changes nothing"


def test_retention_deletes_and_removes_files_before_exit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_logs(tmp_path, age_ms=8 * DAY_MS)
    code, out, err = run(capsys, "retention", "--override", f"log.dirs={tmp_path}", "--json")
    assert code == 0, err
    deleted = json.loads(out)["deleted"]
    assert deleted and all(d["reason"] == "time" and d["topic"] == "t" for d in deleted)
    partition = tmp_path / "t-0"
    assert [p.name for p in partition.glob("*.log")] == ["00000000000000000020.log"]
    assert not list(partition.glob("*.deleted"))


def test_retention_text_says_how_many_segments_in_english(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_logs(tmp_path, age_ms=8 * DAY_MS, count=8)
    code, out, err = run(capsys, "retention", "--override", f"log.dirs={tmp_path}", "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) > 2 and lines[0].startswith("would delete t-0 segment 0 (")
    assert lines[-1] == f"{len(lines) - 1} segments would be deleted"
    code, out, err = run(capsys, "retention", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    assert out.splitlines()[-1] == f"{len(lines) - 1} segments deleted"
    code, out, err = run(capsys, "retention", "--override", f"log.dirs={tmp_path}", "--dry-run")
    assert (code, out) == (0, "0 segments would be deleted\n")


def test_explain_text_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    make_logs(tmp_path, age_ms=-DAY_MS)  # stamped a day in the future
    code, out, err = run(capsys, "explain", "--override", f"log.dirs={tmp_path}", "--topic", "t", "--json")
    assert code == 0, err
    [partition] = json.loads(out)["partitions"]
    assert partition["segments"][0]["reason"] == "future-timestamp"
    assert partition["segments"][0]["future_by_ms"] > 0
    code, out, _ = run(capsys, "explain", "--override", f"log.dirs={tmp_path}")
    assert code == 0
    header, first = out.splitlines()[:2]
    assert "), high watermark 20 (leader-log-end), " in header
    assert header.endswith("retention.ms=604800000 (7d 0h) [default], retention.bytes=-1 [default]")
    segments = partition["segments"]
    largest = segments[0]["largest_timestamp"]
    date = datetime.fromtimestamp(largest / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    expires = datetime.fromtimestamp((largest + 604_800_001) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (
        f"largest ts {date} (record)  KEEP   future-timestamp — largest timestamp 23h 59m in the future"
        in first
    )
    assert (
        f"it expires only at {expires}. Remedy: delete-records up to offset {segments[1]['base_offset']} "
        in first
    )
    assert "message.timestamp.type=LogAppendTime" in first
    assert str(largest) not in out, "text mode shows dates, not ms since the epoch"


def test_explain_text_says_ages_in_words_and_the_cleaner_remedy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_logs(tmp_path, age_ms=3 * DAY_MS + 2 * 3_600_000 + 60_000)
    compact = (
        "--override",
        "log.cleanup.policy=compact,delete",
        "--override",
        "log.cleaner.min.cleanable.ratio=1",
    )
    code, out, err = run(capsys, "explain", "--override", f"log.dirs={tmp_path}", *compact)
    assert code == 0, err
    lines = out.splitlines()
    assert "within-retention — age 3d 2h ≤ retention.ms (7d 0h); expires at 20" in lines[1]
    assert lines[-1].endswith(
        "would not clean (dirty-ratio-at-or-below-min-cleanable-ratio), on in-process "
        "(below-spark-min-bytes). Remedy: logcleaner clean --topic t --partition 0 cleans it now, "
        "whatever its ratio"
    )


def test_inspections_import_neither_the_cleaner_nor_gen_nor_dump(tmp_path: Path) -> None:
    """``explain`` and ``retention --dry-run`` import only what they run; ``--help`` lists every command."""
    make_logs(tmp_path, age_ms=DAY_MS)
    script = (
        "import json, sys\n"
        "from service.shell.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "heavy = ['cleaner.engine', 'service.shell.tools.gen', 'service.shell.tools.dump',"
        " 'service.shell.daemon']\n"
        "print(json.dumps({'code': code, 'imported': [m for m in heavy if m in sys.modules]}))\n"
    )
    for command in (["explain", "--json"], ["retention", "--dry-run"]):
        args = [sys.executable, "-c", script, *command, "--override", f"log.dirs={tmp_path}"]
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {"code": 0, "imported": []}, done.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "service", "--help"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    for name in ("clean", "dump", "explain", "gen", "retention", "serve", "topic-config"):
        assert f"  {name} " in listed


def test_explain_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "explain", "--override", f"log.dirs={tmp_path}", "--partition", "0")
    assert code == 2 and "--topic" in err
    code, _, err = run(capsys, "explain", "--override", f"log.dirs={tmp_path}", "--topic", "nope")
    assert code == 2 and "nope" in err


def test_topic_config_is_durable_and_takes_effect(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    make_logs(tmp_path, age_ms=2 * DAY_MS)
    base = ["--override", f"log.dirs={tmp_path}"]
    code, out, err = run(
        capsys, "topic-config", *base, "--topic", "t", "--set", "retention.ms=86400000", "--json"
    )
    assert code == 0, err
    configs = {c["name"]: c for c in json.loads(out)["configs"]}
    assert configs["retention.ms"] == {"name": "retention.ms", "value": 86400000, "source": "override"}
    assert configs["segment.bytes"]["source"] == "default"
    code, out, _ = run(capsys, "retention", *base, "--dry-run", "--json")
    assert json.loads(out)["deleted"], "the one-day override makes two-day-old segments expire"
    code, _, err = run(capsys, "topic-config", *base, "--topic", "t", "--set", "retention.ms=-5")
    assert code == 2 and "retention.ms" in err
    code, _, err = run(capsys, "topic-config", *base, "--topic", "t", "--set", "log.retention.ms=5")
    assert code == 2 and "log.retention.ms" in err
    code, out, _ = run(capsys, "topic-config", *base, "--topic", "t", "--delete", "retention.ms", "--json")
    assert {c["name"]: c["source"] for c in json.loads(out)["configs"]}["retention.ms"] == "default"


def test_topic_config_prints_kafka_booleans(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    make_logs(tmp_path, age_ms=0)
    code, out, err = run(capsys, "topic-config", "--override", f"log.dirs={tmp_path}", "--topic", "t")
    assert code == 0, err
    assert "preallocate=false  (default)" in out.splitlines()
    assert "False" not in out and "True" not in out


def test_topic_config_unknown_topic_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    make_logs(tmp_path, age_ms=0)
    base = ["--override", f"log.dirs={tmp_path}"]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, _, err = run(capsys, "topic-config", *base, "--topic", "nosuch", "--set", "retention.ms=1")
    assert code == 2 and "nosuch" in err and str(tmp_path) in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before, "nothing stored for the unknown topic"
    code, out, err = run(capsys, "topic-config", *base, "--topic", "nosuch", "--allow-missing-topic")
    assert code == 0, err
    assert "retention.ms=" in out

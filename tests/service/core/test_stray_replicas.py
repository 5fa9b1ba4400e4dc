"""Stray replicas (Kafka ``LogManager.loadLog``, ``isStrayKraftReplica``): a partition dir whose topic id is
not its topic's, or one the broker renamed ``-stray``, is never retained, cleaned, deleted or renamed, and is
listed (``explain``, ``GET /v1/logs/stray``), on dirs laid out as a broker leaves them (``gen``: segments,
indexes, snapshots, ``partition.metadata``, both checkpoints and the clean-shutdown marker)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from service.core.stray_replicas import KnownTopics, ReplicaDir, find_stray_replicas, survey_replica_dirs
from service.shell.cli import main
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_files import RECOVERY_POINT_CHECKPOINT
from service.storage.partition_metadata import new_topic_id, read_partition_metadata, write_partition_metadata
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import assert_problem, serve_daemon

OLD_MS = 1_000_000  # 1970: every segment is past any retention.ms
STRAY_SUFFIX_DIR = "t-5.0f1e2d3c4b5a69788796a5b4c3d2e1f0-stray"


def gen(log_dir: Path, topic: str, partitions: int) -> None:
    args = ["gen", "--log-dir", str(log_dir), "--topic", topic, "--partitions", str(partitions)]
    args += ["--records", "40", "--batch-size", "5", "--value-size", "10", "--segment-bytes", "400"]
    assert main([*args, "--timestamp-start", str(OLD_MS)]) == 0


def files_of(directory: Path) -> dict[str, str]:
    """Every file of a partition dir and a hash of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def give_new_topic_id(directory: Path) -> str:
    """The dir now carries another incarnation's topic id, as a broker leaves an old replica behind."""
    (directory / "partition.metadata").unlink()
    return write_partition_metadata(directory, new_topic_id()).topic_id


def broker_dir(log_dir: Path) -> dict[str, dict[str, str]]:
    """``t`` (3 partitions, t-1 of another incarnation), ``u`` (2 partitions of 2 ids: no majority) and a
    ``-stray`` dir the broker renamed; returns the strays' files."""
    gen(log_dir, "t", 3)
    gen(log_dir, "u", 2)
    give_new_topic_id(log_dir / "t-1")
    give_new_topic_id(log_dir / "u-1")
    shutil.copytree(log_dir / "t-2", log_dir / STRAY_SUFFIX_DIR)
    return {name: files_of(log_dir / name) for name in ("t-1", "u-0", "u-1", STRAY_SUFFIX_DIR)}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_topic_id_most_partitions_share_decides() -> None:
    tp = [TopicPartition("t", p) for p in range(4)]
    dirs = [ReplicaDir(tp[p], Path("/d"), f"t-{p}", "", "A" if p != 1 else "B") for p in range(3)]
    dirs.append(ReplicaDir(tp[3], Path("/d"), "t-3", "", None))  # no partition.metadata: no vote, not stray
    [stray] = find_stray_replicas(dirs)
    assert stray.topic_partition == tp[1] and stray.topic_id == "B"
    assert "not the topic's A" in stray.reason and "2 of its 3" in stray.reason

    split = [ReplicaDir(tp[p], Path("/d"), f"t-{p}", "", "AB"[p]) for p in range(2)]
    held = find_stray_replicas(split)
    assert [s.topic_partition for s in held] == tp[:2]
    assert all("none leads" in s.reason for s in held)

    future = ReplicaDir(tp[0], Path("/e"), "t-0.abc-future", "future", "B")
    renamed = ReplicaDir(tp[2], Path("/e"), "t-2.abc-stray", "stray", "A")
    assert [s.path for s in find_stray_replicas([*dirs[:1], future, renamed])] == [renamed.path]


def test_the_survey_reads_each_dirs_topic_id(tmp_path: Path) -> None:
    """Kafka's form, another form Kafka reads (CRLF, a final newline), a malformed file and none."""
    texts = {
        "t-0": b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
        "t-1": b"version: 0\r\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n",
        "t-2": b"version: 0\ntopic_id: not-an-id",
    }
    for name, text in texts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "partition.metadata").write_bytes(text)
    (tmp_path / "t-3").mkdir()
    (tmp_path / "t-4.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "lost+found").mkdir()
    found = {r.name: (r.kind, r.topic_id) for r in survey_replica_dirs([tmp_path])}
    assert found == {
        "t-0": ("", "AAAAAAAAAAAAAAAAAAAAAQ"),
        "t-1": ("", "AAAAAAAAAAAAAAAAAAAAAQ"),
        "t-2": ("", None),
        "t-3": ("", None),
    }


def test_a_survey_of_some_topics_reads_only_their_dirs(tmp_path: Path) -> None:
    """A share of an inspection surveys the topics it has dirs of (``surveys``): all their dirs, no other."""
    for name in ("a-0", "a-1", "b-0", "ab-0"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "partition.metadata").write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    found = survey_replica_dirs([tmp_path], surveys=lambda topic: topic == "a")
    assert sorted(r.name for r in found) == ["a-0", "a-1"]
    assert all(r.topic_id == "AAAAAAAAAAAAAAAAAAAAAQ" for r in found)


def test_the_brokers_metadata_decides_alone_when_given() -> None:
    tp = [TopicPartition("t", p) for p in range(3)]
    dirs = [ReplicaDir(tp[p], Path("/d"), f"t-{p}", "", "B" if p else "A") for p in range(3)]
    dirs.append(ReplicaDir(TopicPartition("gone", 0), Path("/d"), "gone-0", "", "C"))
    dirs.append(ReplicaDir(TopicPartition("t", 3), Path("/d"), "t-3", "", None))
    known = KnownTopics({"t": "A"}, assigned={tp[0], tp[1]})
    reasons = {str(s.path): s.reason for s in find_stray_replicas(dirs, known)}
    assert set(reasons) == {"/d/t-1", "/d/t-2", "/d/gone-0", "/d/t-3"}  # the majority (B) does not count
    assert "not the topic's A" in reasons["/d/t-1"]
    assert "not in the broker's metadata" in reasons["/d/gone-0"]
    assert "no topic id" in reasons["/d/t-3"]
    only_unassigned = find_stray_replicas(dirs[:1], KnownTopics({"t": "A"}, assigned=set()))
    assert "does not assign" in only_unassigned[0].reason


def test_retention_and_explain_leave_stray_replicas_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    strays = broker_dir(log_dir)
    checkpoint = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT)
    stray_tps = {TopicPartition("t", 1), TopicPartition("u", 0), TopicPartition("u", 1)}
    entries_before = {tp: o for tp, o in checkpoint.read().items() if tp in stray_tps}
    assert len(entries_before) == 3
    base = ["--override", f"log.dirs={log_dir}", "--override", "log.segment.delete.delay.ms=0"]
    capsys.readouterr()  # gen's lines

    code, out, err = run(capsys, "explain", *base, "--json")
    assert code == 0, err
    docs = {(d["topic"], d["partition"], d["stray"]): d for d in json.loads(out)["partitions"]}
    assert sorted(docs) == [
        ("t", 0, False),
        ("t", 1, True),
        ("t", 2, False),
        ("t", 5, True),
        ("u", 0, True),
        ("u", 1, True),
    ]
    t1 = docs["t", 1, True]
    assert t1["path"] == str(log_dir.resolve() / "t-1") and "2 of its 3" in t1["reason"]
    assert t1["topic_id"] == read_partition_metadata(log_dir / "t-1").topic_id  # type: ignore[union-attr]
    assert t1["segments"] and {s["reason"] for s in t1["segments"]} == {"stray-replica"}
    assert t1["cleaner"] == {"would_clean": False, "reason": "stray-replica"}
    assert "-stray" in docs["t", 5, True]["reason"] and "none leads" in docs["u", 0, True]["reason"]
    assert {s["reason"] for s in docs["t", 0, False]["segments"]} == {"time"}
    code, out, _ = run(capsys, "explain", *base, "--topic", "u")
    assert code == 0 and out.count("STRAY REPLICA") == 2

    code, out, err = run(capsys, "retention", *base, "--json")
    assert code == 0, err
    deleted = {(d["topic"], d["partition"]) for d in json.loads(out)["deleted"]}
    assert deleted == {("t", 0), ("t", 2)}
    assert {name: files_of(log_dir / name) for name in strays} == strays, "byte for byte, no rename"
    assert {tp: o for tp, o in checkpoint.read().items() if tp in stray_tps} == entries_before
    assert "t-1" in [p.name for p in log_dir.iterdir()]


def test_an_old_incarnation_in_another_log_dir_is_stray(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Kafka's case for strays: a log dir comes back with a replica of a deleted and re-created topic."""
    live, old = tmp_path / "a", tmp_path / "b"
    gen(live, "t", 3)
    gen(old, "t", 1)
    stray = files_of(old / "t-0")
    capsys.readouterr()  # gen's lines
    log_dirs = f"log.dirs={live},{old}"
    code, out, err = run(capsys, "retention", "--override", log_dirs, "--json")
    assert code == 0, err
    assert {(d["topic"], d["partition"]) for d in json.loads(out)["deleted"]} == {("t", p) for p in range(3)}
    assert files_of(old / "t-0") == stray
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Stray replica")]
    assert len(warnings) == 1, "named once"
    assert warnings[0].startswith(f"Stray replica t-0 in {old.resolve() / 't-0'} left alone")
    assert "which 3 of its 4 partition dirs carry" in warnings[0]


def test_the_api_lists_stray_replicas_and_serves_none(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    strays = broker_dir(log_dir)
    with serve_daemon(log_dir) as served:
        listed = served.client.get("/v1/logs/stray").json()["partitions"]
        assert [(s["topic"], s["partition"]) for s in listed] == [("t", 1), ("t", 5), ("u", 0), ("u", 1)]
        assert listed[1]["path"] == str(log_dir.resolve() / STRAY_SUFFIX_DIR)
        assert all(s["log_dir"] == str(log_dir.resolve()) and s["reason"] for s in listed)
        detail = assert_problem(served.client.get("/v1/topics/u/partitions/0"), 404)["detail"]
        assert "stray" in str(detail)
        assert served.client.get("/v1/topics/t").json()["partitions"] != []
        assert_problem(served.client.post("/v1/topics", json={"name": "u", "partitions": 1}), 409)
        explained = served.client.get("/v1/retention/explain", params={"topic": "u"})
        assert explained.status_code == 200, explained.text
        assert [d["stray"] for d in explained.json()["partitions"]] == [True, True]
        ran = served.client.post("/v1/retention/run").json()["deleted"]
        assert {(d["topic"], d["partition"]) for d in ran} == {("t", 0), ("t", 2)}
        metrics = served.client.get("/metrics").text
        assert 'topic="u"' not in metrics
        assert "logcleaner_stray_replicas 4.0" in metrics
    assert {name: files_of(log_dir / name) for name in strays} == strays

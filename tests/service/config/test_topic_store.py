"""TopicConfigStore: durable, versioned copies in every log dir; the highest readable version wins."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.config.topic_store import TOPIC_CONFIGS_FILE, TopicConfigStore


@pytest.fixture
def log_dirs(tmp_path: Path) -> list[Path]:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    for d in dirs:
        d.mkdir()
    return dirs


def _write_copy(log_dir: Path, version: int, topics: dict[str, dict[str, str]]) -> None:
    (log_dir / TOPIC_CONFIGS_FILE).write_text(json.dumps({"version": version, "topics": topics}))


def _read_copy(log_dir: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((log_dir / TOPIC_CONFIGS_FILE).read_text())
    return doc


def test_empty_dirs_load_as_version_zero(log_dirs: list[Path]) -> None:
    store = TopicConfigStore(log_dirs)
    store.load()
    assert (store.version, store.all(), store.get("t")) == (0, {}, {})
    assert not any((d / TOPIC_CONFIGS_FILE).exists() for d in log_dirs)  # loading writes nothing


def test_update_writes_every_dir_and_survives_a_new_store(log_dirs: list[Path]) -> None:
    store = TopicConfigStore(log_dirs)
    store.load()
    assert store.update("orders", {"cleanup.policy": "compact", "retention.ms": -1}) == {
        "cleanup.policy": "compact",
        "retention.ms": "-1",
    }
    for d in log_dirs:
        assert _read_copy(d) == {
            "version": 1,
            "topics": {"orders": {"cleanup.policy": "compact", "retention.ms": "-1"}},
        }
        assert not (d / (TOPIC_CONFIGS_FILE + ".tmp")).exists()
    reopened = TopicConfigStore(log_dirs)
    reopened.load()
    assert reopened.version == 1
    assert reopened.get("orders") == {"cleanup.policy": "compact", "retention.ms": "-1"}


def test_update_sets_and_deletes_and_bumps_the_version(log_dirs: list[Path]) -> None:
    store = TopicConfigStore(log_dirs)
    store.update("t", {"segment.bytes": "1000", "retention.bytes": 5})
    assert store.update("t", {"segment.bytes": 14}, delete=["retention.bytes", "flush.ms"]) == {
        "segment.bytes": "14"
    }
    assert store.version == 2
    assert store.update("t", {"segment.bytes": "14"}, delete=["flush.ms"]) == {"segment.bytes": "14"}
    assert store.version == 2  # no change: no new version
    assert store.update("t", {}, delete=["segment.bytes"]) == {}
    assert store.all() == {"t": {}} and store.has("t"), "known still: its configs fall to the broker's"
    assert not store.has("other")
    assert _read_copy(log_dirs[0]) == {"version": 3, "topics": {"t": {}}}


def test_invalid_update_changes_nothing(log_dirs: list[Path]) -> None:
    store = TopicConfigStore(log_dirs)
    store.update("t", {"retention.ms": "10"})
    with pytest.raises(InvalidInputError, match=r"segment\.bytes.*'13'|'13'.*segment\.bytes"):
        store.update("t", {"retention.ms": "20", "segment.bytes": "13"})
    with pytest.raises(InvalidInputError, match="Unknown topic config name 'bogus'"):
        store.update("t", {}, delete=["bogus"])
    with pytest.raises(InvalidInputError, match="both set and deleted"):
        store.update("t", {"retention.ms": "20"}, delete=["retention.ms"])
    with pytest.raises(InvalidInputError, match="invalid topic name"):
        store.update("bad/name", {"retention.ms": "20"})
    assert store.version == 1
    assert store.get("t") == {"retention.ms": "10"}
    assert _read_copy(log_dirs[1])["version"] == 1


def test_remove_topic(log_dirs: list[Path]) -> None:
    store = TopicConfigStore(log_dirs)
    store.update("a", {"retention.ms": "1"})
    store.update("b", {"retention.ms": "2"})
    store.remove_topic("a")
    store.remove_topic("never-configured")  # no-op, no write
    assert store.version == 3
    assert store.all() == {"b": {"retention.ms": "2"}}
    reopened = TopicConfigStore(log_dirs)
    assert reopened.all() == {"b": {"retention.ms": "2"}}  # loads on first use


def test_highest_version_wins_across_dirs(log_dirs: list[Path]) -> None:
    _write_copy(log_dirs[0], 4, {"t": {"retention.ms": "4"}})
    _write_copy(log_dirs[1], 5, {"t": {"retention.ms": "5"}})
    store = TopicConfigStore(log_dirs)
    store.load()
    assert (store.version, store.get("t")) == (5, {"retention.ms": "5"})
    store.update("t", {"segment.ms": "9"})
    assert [_read_copy(d)["version"] for d in log_dirs] == [6, 6]
    assert store.get("t") == {"retention.ms": "5", "segment.ms": "9"}


def test_a_missing_copy_is_skipped(log_dirs: list[Path]) -> None:
    _write_copy(log_dirs[1], 2, {"t": {"cleanup.policy": "compact"}})
    store = TopicConfigStore(log_dirs)
    store.load()
    assert store.get("t") == {"cleanup.policy": "compact"}


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"version": "1", "topics": {}}',
        b'{"version": 1, "topics": {"t": {"retention.ms": "-2"}}}',
        b'{"version": 1, "topics": {"t": {"unknown.key": "1"}}}',
        b'{"version": 1, "topics": {"bad/topic": {}}}',
    ],
)
def test_a_corrupt_copy_is_logged_and_the_others_used(
    log_dirs: list[Path], content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    (log_dirs[0] / TOPIC_CONFIGS_FILE).write_bytes(content)
    _write_copy(log_dirs[1], 1, {"t": {"retention.ms": "7"}})
    store = TopicConfigStore(log_dirs)
    with caplog.at_level(logging.ERROR, logger="service.config.topic_store"):
        store.load()
    assert store.get("t") == {"retention.ms": "7"}
    assert str(log_dirs[0] / TOPIC_CONFIGS_FILE) in caplog.text


def test_a_corrupt_copy_is_kept_aside_and_reported_once(
    log_dirs: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    (log_dirs[0] / TOPIC_CONFIGS_FILE).write_bytes(b'{"version": 3, "topics": {"t": {"retention.ms": "-2"}}}')
    _write_copy(log_dirs[1], 1, {"t": {"retention.ms": "7"}})
    store = TopicConfigStore(log_dirs)
    with caplog.at_level(logging.ERROR, logger="service.config.topic_store"):
        store.load()
        store.load()  # a refresh: the file is aside, nothing is reported twice
    assert store.get("t") == {"retention.ms": "7"}
    [aside] = store.set_aside
    assert aside.path == log_dirs[0] / TOPIC_CONFIGS_FILE
    assert aside.kept_as is not None and aside.kept_as.parent == log_dirs[0]
    assert aside.kept_as.name.startswith(TOPIC_CONFIGS_FILE + ".corrupt-")
    assert aside.kept_as.read_bytes().startswith(b'{"version": 3')
    assert not aside.path.exists()
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is None
    assert "the other log dirs' copies are used" in caplog.text


def test_the_only_copy_corrupt_starts_on_defaults_and_keeps_the_file(
    log_dirs: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    """No exception and no traceback; the file is kept aside and the message says what
    happens (not "using the other log dirs' copies", since there is none)."""
    (log_dirs[0] / TOPIC_CONFIGS_FILE).write_bytes(b"{")
    store = TopicConfigStore(log_dirs)
    with caplog.at_level(logging.ERROR, logger="service.config.topic_store"):
        store.load()
    assert (store.version, store.all()) == (0, {})
    [aside] = store.set_aside
    assert aside.kept_as is not None and aside.kept_as.read_bytes() == b"{"
    assert "not a JSON document" in aside.reason
    assert "other log dirs" not in caplog.text
    assert "every topic starts on the broker defaults" in caplog.text
    assert str(log_dirs[0] / TOPIC_CONFIGS_FILE) in caplog.text
    assert all(r.exc_info is None for r in caplog.records)
    store.update("t", {"retention.ms": "5"})  # the next change writes a fresh store
    assert TopicConfigStore(log_dirs).get("t") == {"retention.ms": "5"}


def test_a_dir_that_cannot_be_written_is_skipped_if_another_is(tmp_path: Path, log_dirs: list[Path]) -> None:
    gone = tmp_path / "gone"
    store = TopicConfigStore([*log_dirs, gone])
    store.load()
    assert store.update("t", {"retention.ms": "3"}) == {"retention.ms": "3"}
    assert all(_read_copy(d)["version"] == 1 for d in log_dirs)

    only_gone = TopicConfigStore([gone])
    with pytest.raises(OSError):
        only_gone.update("t", {"retention.ms": "3"})
    assert (only_gone.version, only_gone.get("t")) == (0, {})


def test_concurrent_updates_lose_nothing(log_dirs: list[Path]) -> None:
    store = TopicConfigStore(log_dirs)
    store.load()

    def work(i: int) -> None:
        for j in range(5):
            store.update(f"topic-{i}", {"retention.ms": str(j)})

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.version == 20
    assert store.all() == {f"topic-{i}": {"retention.ms": "4"} for i in range(4)}
    assert _read_copy(log_dirs[0])["version"] == 20


def test_needs_a_log_dir() -> None:
    with pytest.raises(ValueError, match="at least one log dir"):
        TopicConfigStore([])


def test_load_if_changed_rereads_only_after_a_copy_changed_on_disk(log_dirs: list[Path]) -> None:
    daemon = TopicConfigStore(log_dirs)
    assert daemon.load_if_changed() is True  # the first load
    assert daemon.load_if_changed() is False
    TopicConfigStore(log_dirs).update("orders", {"retention.ms": 1000})  # another process
    assert daemon.load_if_changed() is True
    assert (daemon.version, daemon.get("orders")) == (1, {"retention.ms": "1000"})
    assert daemon.load_if_changed() is False
    (log_dirs[1] / TOPIC_CONFIGS_FILE).unlink()  # one copy gone: the other still holds version 1
    assert daemon.load_if_changed() is True
    assert daemon.version == 1

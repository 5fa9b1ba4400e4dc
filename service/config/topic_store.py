"""Durable topic-level config overrides: one small JSON file, copied into every log dir.

Kafka keeps topic configs in ZooKeeper or the KRaft metadata log; with neither, the service keeps them
next to the data they govern, so any surviving log dir carries them. File layout
(``<log dir>/.logcleaner-topic-configs.json``, UTF-8)::

    {"version": 7, "topics": {"orders": {"cleanup.policy": "compact", "retention.ms": "-1"}}}

Values are Kafka's strings, already validated. ``version`` grows by one with every change.

Crash behaviour: each copy is replaced with :func:`~service.storage.atomic.write_atomically`, so a copy
is always a complete old or new file. A crash part-way through the copies leaves some dirs on version N+1
and the rest on N; :meth:`TopicConfigStore.load` takes the highest version, so the change is either
fully seen or (if no copy was replaced) not at all. A dir with a missing or unreadable copy is skipped
with a warning. A corrupt copy is renamed aside (``<file>.corrupt-<UTC time>``, kept for the operator),
logged as one error line and listed by :attr:`TopicConfigStore.set_aside`; the other dirs' copies are used,
or, if none is readable, every topic starts on the broker defaults (loudly, never silently: the file is
kept and reported). Log loading ignores the file: it is not a partition directory (Kafka's loader ignores
stray files the same way).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import CorruptDataError, InvalidInputError
from service.config.definitions import InvalidConfigError
from service.config.topic_config import topic_config_def, validate_topic_overrides
from service.storage.atomic import rename_durably, write_atomically
from service.storage.log_files import is_valid_topic_name

__all__ = ["TOPIC_CONFIGS_FILE", "SetAsideFile", "TopicConfigStore"]

logger = logging.getLogger(__name__)

TOPIC_CONFIGS_FILE = ".logcleaner-topic-configs.json"

_Topics = dict[str, dict[str, str]]
_FileStamp = tuple[int, int, int] | None  # (inode, size, mtime in ns) of a copy; None: missing


@dataclass(frozen=True, slots=True)
class SetAsideFile:
    """A corrupt copy of the store, renamed ``kept_as`` so that the operator can inspect or restore it."""

    path: Path
    kept_as: Path | None  # None if the rename itself failed (the file is then read, and reported, again)
    reason: str


class TopicConfigStore:
    """The owner of every topic's overrides, in memory and on disk.

    ``self._lock`` guards ``_version``, ``_topics`` and ``_loaded``, and serialises the file writes
    (``write_atomically`` needs one writer per path). Readers get copies, so they never see a change
    half-applied. :meth:`load` runs on first use if the caller did not run it.
    """

    def __init__(self, log_dirs: Sequence[Path]) -> None:
        if not log_dirs:
            raise ValueError("TopicConfigStore needs at least one log dir")
        self._paths = tuple(Path(d) / TOPIC_CONFIGS_FILE for d in log_dirs)
        self._lock = threading.Lock()
        self._version = 0
        self._topics: _Topics = {}
        self._loaded = False
        self._set_aside: list[SetAsideFile] = []
        self._seen: tuple[_FileStamp, ...] = ()  # the copies' stamps as the last load found them

    @property
    def set_aside(self) -> list[SetAsideFile]:
        """The corrupt copies found since start-up, renamed aside (oldest first)."""
        with self._lock:
            return list(self._set_aside)

    @property
    def version(self) -> int:
        with self._lock:
            self._ensure_loaded()
            return self._version

    def load(self) -> None:
        """(Re)read every copy, keep the highest version (module docstring: what is skipped, what raises)."""
        with self._lock:
            self._load_locked()

    def load_if_changed(self) -> bool:
        """Reload if a copy changed on disk since the last load (a few ``stat`` calls when none did).

        Every write replaces a copy by a rename, so its stamp (inode, size, mtime) changes with it. A
        daemon calls this often to see another process's change (``logcleaner topic-config``) at once.
        """
        with self._lock:
            if self._loaded and self._stamps() == self._seen:
                return False
            self._load_locked()
            return True

    def _stamps(self) -> tuple[_FileStamp, ...]:
        stamps: list[_FileStamp] = []
        for path in self._paths:
            try:
                stat = path.stat()
            except OSError:
                stamps.append(None)
                continue
            stamps.append((stat.st_ino, stat.st_size, stat.st_mtime_ns))
        return tuple(stamps)

    def _load_locked(self) -> None:
        self._seen = self._stamps()  # before reading: a write after this is seen by the next check
        best: tuple[int, _Topics] | None = None
        corrupt: list[tuple[Path, CorruptDataError]] = []
        for path in self._paths:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                logger.debug("no topic config file %s yet", path)
                continue
            except OSError as exc:
                logger.warning("topic config file %s is unreadable; skipped: %s", path, exc)
                continue
            try:
                version, topics = _decode(data, path)
            except CorruptDataError as exc:
                corrupt.append((path, exc))
                continue
            if best is None or version > best[0]:
                best = (version, topics)
        for path, error in corrupt:
            self._set_aside.append(_set_aside(path, error, others_readable=best is not None))
        self._version, self._topics = best if best is not None else (0, {})
        self._loaded = True
        logger.debug(
            "loaded topic configs version %d (%d topics with overrides)", self._version, len(self._topics)
        )

    def get(self, topic: str) -> dict[str, str]:
        """The overrides of ``topic`` (empty if it has none)."""
        with self._lock:
            self._ensure_loaded()
            return dict(self._topics.get(topic, {}))

    def has(self, topic: str) -> bool:
        """Whether logcleaner knows ``topic``'s configs: it has overrides, or an import described it (a
        topic that sets none keeps an empty entry)."""
        with self._lock:
            self._ensure_loaded()
            return topic in self._topics

    def all(self) -> dict[str, dict[str, str]]:
        """Every topic with overrides and its overrides."""
        with self._lock:
            self._ensure_loaded()
            return {topic: dict(overrides) for topic, overrides in self._topics.items()}

    def update(self, topic: str, set: Mapping[str, object], delete: Sequence[str] = ()) -> dict[str, str]:
        """Set and delete overrides of ``topic`` durably; return its new overrides.

        All changes are validated before anything is written (``InvalidInputError`` names the key). A
        key may not be both set and deleted; deleting a key that is not set is a no-op, as in Kafka.
        """
        if not is_valid_topic_name(topic):
            raise InvalidInputError(
                f"invalid topic name {topic!r}: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'"
            )
        normalized = validate_topic_overrides(set)
        both = sorted(normalized.keys() & frozenset(delete))
        if both:
            raise InvalidConfigError(
                f"config {both[0]!r} is both set and deleted in one request", name=both[0], value=None
            )
        for name in delete:
            topic_config_def(name)  # an unknown name is an error, as in Kafka
        with self._lock:
            self._ensure_loaded()
            overrides = {**self._topics.get(topic, {}), **normalized}
            for name in delete:
                overrides.pop(name, None)
            if overrides == self._topics.get(topic, {}):
                return overrides  # nothing changes: no new version, no write
            known = overrides or topic in self._topics  # an imported topic stays known without overrides
            topics = {**self._topics, topic: overrides} if known else _without(self._topics, topic)
            self._commit(topics)
            return dict(overrides)

    def update_topics(self, changes: Mapping[str, Mapping[str, object]]) -> None:
        """Set overrides of several topics durably in one version (``topic-config --import``): all are
        validated first, then written together, so a crash leaves all of them or none."""
        normalized: _Topics = {}
        for topic, configs in changes.items():
            if not is_valid_topic_name(topic):
                raise InvalidInputError(f"invalid topic name {topic!r}")
            normalized[topic] = validate_topic_overrides(configs)
        with self._lock:
            self._ensure_loaded()
            topics = {name: dict(overrides) for name, overrides in self._topics.items()}
            for topic, configs in normalized.items():
                topics[topic] = {**topics.get(topic, {}), **configs}
            if topics != self._topics:
                self._commit(topics)  # a topic described with no override of its own is kept, empty

    def remove_topic(self, topic: str) -> None:
        """Forget ``topic``'s overrides (its deletion); a topic without overrides writes nothing."""
        with self._lock:
            self._ensure_loaded()
            if topic in self._topics:
                self._commit(_without(self._topics, topic))

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._load_locked()

    def _commit(self, topics: _Topics) -> None:
        """Write ``topics`` as the next version into every dir, then adopt it. Caller holds the lock.

        A dir whose write fails is logged and skipped; the change stands if one copy was written (that
        copy has the highest version, so it is what the next load sees). If none was, nothing changes.
        """
        version = self._version + 1
        data = _encode(version, topics)
        written = 0
        errors: list[OSError] = []
        for path in self._paths:
            try:
                write_atomically(path, data)
                written += 1
            except OSError as exc:
                logger.exception("cannot write topic config file %s", path)
                errors.append(exc)
        if written == 0:
            raise errors[0]
        self._version, self._topics = version, topics


def _set_aside(path: Path, error: CorruptDataError, *, others_readable: bool) -> SetAsideFile:
    """Rename a corrupt copy aside and say, in one error line, what the service does instead."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    if target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{uuid.uuid4().hex[:8]}")
    kept_as: Path | None = target
    try:
        rename_durably(path, target)
    except OSError as rename_error:
        logger.error("cannot rename the corrupt topic config file %s aside: %s", path, rename_error)
        kept_as = None
    if others_readable:
        outcome = "the other log dirs' copies are used"
    else:
        outcome = "no readable copy is left: every topic starts on the broker defaults"
    logger.error(
        "topic config file %s is corrupt (%s); kept aside as %s; %s",
        path,
        error.reason,
        kept_as if kept_as is not None else "(not renamed)",
        outcome,
    )
    return SetAsideFile(path, kept_as, error.reason)


def _without(topics: _Topics, topic: str) -> _Topics:
    return {name: overrides for name, overrides in topics.items() if name != topic}


def _encode(version: int, topics: _Topics) -> bytes:
    return (json.dumps({"version": version, "topics": topics}, indent=2, sort_keys=True) + "\n").encode()


def _decode(data: bytes, path: Path) -> tuple[int, _Topics]:
    """Parse and check one copy; anything off is ``CorruptDataError`` with the path."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptDataError(f"not a JSON document: {exc}", path=str(path)) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), dict):
        raise CorruptDataError('expected {"version": N, "topics": {...}}', path=str(path))
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise CorruptDataError(f"version {version!r} is not a non-negative integer", path=str(path))
    topics: _Topics = {}
    for topic, overrides in doc["topics"].items():
        if not is_valid_topic_name(topic) or not isinstance(overrides, dict):
            raise CorruptDataError(f"bad entry for topic {topic!r}", path=str(path))
        try:
            topics[topic] = validate_topic_overrides(overrides)
        except InvalidInputError as exc:
            raise CorruptDataError(f"topic {topic!r}: {exc}", path=str(path)) from exc
    return version, topics

"""Reading what ``kafka-configs.sh --describe [--all] --entity-type topics`` prints, for ``topic-config
--import``: a ZooKeeper-era cluster's topic configs (logcleaner reads no ZooKeeper) taken over in one step.

The text is Kafka's ``ConfigCommand.describeResourceConfig``::

    All configs for topic orders are:
      cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, …}
      segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}

(the synonyms of ``cleanup.policy`` go on: ``DEFAULT_CONFIG:log.cleanup.policy=delete``)
(``Dynamic configs …`` without ``--all``). An entry whose first synonym is ``DYNAMIC_TOPIC_CONFIG`` is the
topic's own config, set with ``--alter`` or at creation: that is what is imported. Every other entry is
the broker's or Kafka's default, which logcleaner's own broker config stands for. Topic configs logcleaner
has no use for (``min.insync.replicas`` …) are reported as skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from service.base.errors import InvalidInputError
from service.config.definitions import DEFS_BY_TOPIC_NAME
from service.config.topic_config import validate_topic_overrides
from service.storage.log_files import is_valid_topic_name

__all__ = ["ImportedConfigs", "parse_topic_configs_description", "read_topic_configs_description"]

_HEADER = re.compile(r"^(All|Dynamic) configs for (\S+) (\S+) are:$")
_ENTRY = re.compile(r"^  ([^=\s]+)=(.*) sensitive=(true|false) synonyms=\{(.*)\}$")
_TOPIC_SOURCE = "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True, slots=True)
class ImportedConfigs:
    """Per topic, its own configs in Kafka's string form (validated); and what was left out, and why."""

    topics: dict[str, dict[str, str]] = field(default_factory=dict)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (topic, name, reason)


def read_topic_configs_description(path: Path) -> ImportedConfigs:
    """Parse the file at ``path``; ``InvalidInputError`` naming the file and line for text it cannot read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc
    return parse_topic_configs_description(text, source=str(path))


def parse_topic_configs_description(text: str, *, source: str) -> ImportedConfigs:
    """The topic configs of ``text`` (``source`` names it in errors)."""
    result = ImportedConfigs()
    topic: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{source}, line {number}"
        if not line.strip():
            continue
        if header := _HEADER.match(line):
            entity_type, name = header.group(2), header.group(3)
            if entity_type != "topic":
                raise InvalidInputError(
                    f"{where}: configs of a {entity_type}; --import reads the output of "
                    "kafka-configs.sh --describe --entity-type topics"
                )
            if not is_valid_topic_name(name):
                raise InvalidInputError(f"{where}: {name!r} is not a valid topic name")
            topic = name
            result.topics.setdefault(topic, {})  # described: its configs are known, overrides or none
            continue
        entry = _ENTRY.match(line)
        if entry is None or topic is None:
            raise InvalidInputError(
                f"{where}: expected 'All configs for topic T are:' or "
                f"'  name=value sensitive=… synonyms={{…}}', got {line[:80]!r}"
            )
        _add_entry(result, topic, entry.group(1), entry.group(2), entry.group(4), where)
    return result


def _add_entry(result: ImportedConfigs, topic: str, name: str, value: str, synonyms: str, where: str) -> None:
    first = synonyms.split(", ", 1)[0]
    source, _, assignment = first.partition(":")
    if source != _TOPIC_SOURCE:
        return  # the broker's value or Kafka's default: logcleaner's broker config stands for it
    synonym_name, sep, _ = assignment.partition("=")
    if synonym_name != name or not sep:
        raise InvalidInputError(f"{where}: synonym {first!r} does not set {name}")
    if name not in DEFS_BY_TOPIC_NAME:
        result.skipped.append((topic, name, "not a topic config logcleaner uses"))
        return
    try:
        result.topics.setdefault(topic, {}).update(validate_topic_overrides({name: value}))
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: topic {topic}: {exc}") from exc

"""The JSON documents that the CLI's ``--json`` and the REST API share: one builder each.

``retention`` (``logcleaner retention``, ``POST /v1/retention/run``), ``explain`` (``logcleaner explain``,
``GET /v1/retention/explain``) and a topic's effective configs (``logcleaner topic-config``,
``GET /v1/topics/{t}/configs``). Both faces call these, so the documents cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from service.base.errors import NotFoundError
from service.config.topic_config import ConfigEntry
from service.core.cleanable import cleaner_checkpoints
from service.core.engine_choice import EngineChoice
from service.core.explain import explain_partition, explain_stray_replica
from service.core.log_manager import DeletedSegment, LogManager
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = [
    "deleted_segment_doc",
    "explain_document",
    "explain_partitions",
    "retention_document",
    "topic_config_document",
]

JsonDoc = dict[str, object]


def deleted_segment_doc(deleted: DeletedSegment) -> JsonDoc:
    return {
        "topic": deleted.topic,
        "partition": deleted.partition,
        "base_offset": deleted.base_offset,
        "size_bytes": deleted.size_bytes,
        "reason": str(deleted.reason),
    }


def retention_document(deleted: Iterable[DeletedSegment], *, dry_run: bool) -> JsonDoc:
    """``{"dry_run", "deleted": [{"topic", "partition", "base_offset", "size_bytes", "reason"}]}``."""
    return {"dry_run": dry_run, "deleted": [deleted_segment_doc(d) for d in deleted]}


def explain_document(
    manager: LogManager,
    *,
    cleaner_enabled: bool,
    topic: str | None = None,
    partition: int | None = None,
    engine_choice: EngineChoice | None = None,
) -> JsonDoc:
    """``{"partitions": [...]}``: the explanation of every matching log (:func:`explain_partitions`)."""
    docs = explain_partitions(
        manager,
        cleaner_enabled=cleaner_enabled,
        topic=topic,
        partition=partition,
        engine_choice=engine_choice,
    )
    return {"partitions": docs}


def explain_partitions(
    manager: LogManager,
    *,
    cleaner_enabled: bool,
    topic: str | None = None,
    partition: int | None = None,
    engine_choice: EngineChoice | None = None,
) -> list[JsonDoc]:
    """:func:`~service.core.explain.explain_partition` of every live log matching ``topic``/``partition``, and
    :func:`~service.core.explain.explain_stray_replica` of every stray replica that does.

    Raises ``NotFoundError`` when ``topic`` (and ``partition``) name no live partition.
    """
    logs = [
        log
        for tp, log in sorted(manager.logs.items(), key=_by_topic_partition)
        if (topic is None or tp.topic == topic) and (partition is None or tp.partition == partition)
    ]
    strays = [
        stray
        for stray in manager.stray_replicas
        if (topic is None or stray.topic_partition.topic == topic)
        and (partition is None or stray.topic_partition.partition == partition)
    ]
    if topic is not None and not logs and not strays:
        where = f"topic {topic!r}" + (f" partition {partition}" if partition is not None else "")
        raise NotFoundError(f"no partition matches {where}")
    checkpoints = cleaner_checkpoints(logs)
    now = manager.clock.now_ms()
    docs = [
        explain_partition(
            log,
            now_ms=now,
            cleaner_enabled=cleaner_enabled,
            cleaner_checkpoints=checkpoints,
            engine_choice=engine_choice,
            is_moving=manager.has_future_replica(log.topic_partition),
        )
        for log in logs
    ]
    if not strays:
        return docs
    # Each stray replica after the live partition of its name, if any (both lists are in that order).
    keyed = [
        ((log.topic_partition.topic, log.topic_partition.partition, 0), doc)
        for log, doc in zip(logs, docs, strict=True)
    ]
    keyed += [
        ((stray.topic_partition.topic, stray.topic_partition.partition, 1), explain_stray_replica(stray))
        for stray in strays
    ]
    return [doc for _, doc in sorted(keyed, key=lambda item: item[0])]


def _by_topic_partition(item: tuple[TopicPartition, PartitionLog]) -> tuple[str, int]:
    """TopicPartition's own order, compared as a tuple in C rather than by the dataclass's ``__lt__``."""
    return item[0].topic, item[0].partition


def topic_config_document(topic: str, entries: Mapping[str, ConfigEntry]) -> JsonDoc:
    """``{"topic", "configs": [{"name", "value", "source"}]}``, sorted by name."""
    return {
        "topic": topic,
        "configs": [{"name": e.name, "value": e.value, "source": e.source} for e in entries.values()],
    }

"""``logcleaner explain --summary [--exact]``: the whole-broker summary of every log dir, offline.

It reads as ``explain`` does (``inspect_logs``: a read-only load, split over processes at a broker's worth of
partitions), without reading a record: the reasons come from the segments' sizes, offsets and time indexes.
A log dir that cannot be read is the summary's ``unreadable``, never a failed command. ``--exact`` reads
every compacted log's dirty section and what a round would rewrite (``cleaner.compaction.measure``), in one
process, with a progress bar and the bytes read on stderr; without it, compaction is estimated from the key
sketches a daemon left in the log dirs' sketch files (``service.core.sketch_file``), and the bytes of logs
they do not cover are ``compaction_unestimated_bytes``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import click

from cleaner.compaction.measure import measure_round
from service.base.clock import SystemClock
from service.base.errors import InvalidInputError
from service.base.wording import counted
from service.config.broker_config import BrokerConfig
from service.core.compaction_estimate import SegmentSketches, round_segments
from service.core.held_bytes import UNREADABLE, PartitionBytes
from service.core.key_sketch import SegmentSketch
from service.core.log_manager import LogManager
from service.core.sketch_file import read_sketch_file, sketch_entry_name
from service.core.summary import summary_document, summary_parts, unloaded_dir_parts
from service.shell.tools.read_only import ScratchCopies, check_log_dir_paths
from service.storage.topic_partition import TopicPartition

__all__ = ["summary_lines", "summary_of_log_dirs"]

logger = logging.getLogger(__name__)

Inspect = Callable[..., list[PartitionBytes]]
JsonDoc = dict[str, object]


def summary_of_log_dirs(broker: BrokerConfig, inspect_logs: Inspect, *, exact: bool) -> JsonDoc:
    """The summary document of ``broker``'s log dirs; ``inspect_logs`` is ``log_commands.inspect_logs``."""

    def summarize_share(manager: LogManager, copies: ScratchCopies) -> list[PartitionBytes]:
        parts = summary_parts(
            manager, cleaner_enabled=broker.log_cleaner_enable, on_unreadable=_warn_unreadable_checkpoint
        )
        if exact:
            _measure(manager, parts)
        else:
            _estimate_from_sketch_files(manager, copies, parts)
        for part in parts:  # name the user's dirs, not the scratch copies
            if part.path is not None:
                part.path = copies.originals_named(part.path)
        return parts

    unreadable = _unreadable_log_dirs(broker.log_dir_paths)
    readable = tuple(path for path in broker.log_dir_paths if path not in unreadable)
    parts: list[PartitionBytes] = []
    if readable:
        inspected = replace(broker, log_dir_paths=readable, metadata_log_dir=str(broker.metadata_log_path))
        parts = inspect_logs(inspected, summarize_share, allow_offline=True, shares=not exact)
    for path, error in unreadable.items():
        part = PartitionBytes(None, None, error=error, path=str(path))
        part.add(UNREADABLE, 0)
        parts.append(part)
    skip = {Path(p.path) for p in parts if p.topic is None and p.path is not None}
    parts += unloaded_dir_parts(readable, skip=skip)
    return summary_document(parts, generated_at_ms=SystemClock().now_ms())


def _unreadable_log_dirs(log_dirs: Iterable[Path]) -> dict[Path, str]:
    """The log dirs this process cannot read, with why: the summary's ``unreadable``, not a failed command
    (the other commands refuse them: ``read_only.check_log_dir_paths``)."""
    unreadable = {}
    for path in log_dirs:
        try:
            check_log_dir_paths([path])
        except InvalidInputError as exc:
            unreadable[path] = str(exc)
    return unreadable


def _measure(manager: LogManager, parts: list[PartitionBytes]) -> None:
    """Each candidate's round measured, a progress bar over the bytes the rounds read (stderr)."""
    logs = manager.logs
    todo = []
    for part in parts:
        if part.cleanable is not None and part.topic is not None and part.partition is not None:
            log = logs.get(TopicPartition(part.topic, part.partition))
            if log is not None:
                todo.append((part, log))
    total = sum(s.size_bytes for _, log in todo for s in log.snapshot.segments[:-1])
    read = 0
    with click.progressbar(length=total, label="reading dirty sections", file=sys.stderr) as bar:
        for part, log in todo:
            candidate = part.cleanable
            if candidate is None:
                continue
            measured = measure_round(
                log,
                candidate.first_dirty_offset,
                candidate.first_uncleanable_offset,
                manager.clock,
                bar.update,
            )
            part.compaction_freed_bytes = measured.bytes_freed
            part.compaction_exact = True
            read += measured.bytes_read
    click.echo(f"read {read} bytes of {counted(len(todo), 'compacted log')}", err=True)


def _estimate_from_sketch_files(
    manager: LogManager, copies: ScratchCopies, parts: list[PartitionBytes]
) -> None:
    """Each candidate estimated from the sketches the daemon left in the log dirs' sketch files, if they
    cover every segment its round would read (no record is read)."""
    files: dict[Path, dict[str, SegmentSketch]] = {}
    sketches = SegmentSketches()
    logs = manager.logs
    for part in parts:
        if part.cleanable is None or part.topic is None or part.partition is None:
            continue
        log = logs.get(TopicPartition(part.topic, part.partition))
        if log is None:
            continue
        log_dir = copies.original_log_dir(log.log_dir)
        if log_dir not in files:
            try:
                files[log_dir] = read_sketch_file(log_dir)
            except (OSError, ValueError) as exc:
                logger.warning("%s: its key sketches are not used", exc)
                files[log_dir] = {}
        segments = round_segments(log, part)
        for segment in segments:
            sketch = files[log_dir].get(sketch_entry_name(log.directory.name, segment.base_offset))
            if sketch is not None:
                sketches.adopt(segment, sketch)
        part.compaction_freed_bytes = sketches.estimate(segments)


def _warn_unreadable_checkpoint(path: Path, exc: Exception) -> None:
    logger.warning(
        "cleaner-offset-checkpoint of %s cannot be read (%s): its logs count as never cleaned", path, exc
    )


def summary_lines(doc: JsonDoc) -> list[str]:
    """The summary in words: the total, each reason with its bytes and largest partitions, what would come
    back."""
    lines = [f"{doc['total_bytes']} bytes in {counted(_int(doc['partitions']), 'partition')}"]
    held = doc["held"]
    if isinstance(held, list):
        for entry in held:
            top = ", ".join(f"{t['topic']}-{t['partition']} {t['bytes']}" for t in entry["top"] if t["topic"])
            lines.append(
                f"  {entry['reason']}: {entry['bytes']} bytes, {counted(entry['partitions'], 'partition')}"
                + (f" (largest: {top})" if top else "")
            )
            lines += [f"    {e['path']}: {e['error']}" for e in entry.get("errors", [])]
    reclaimable = doc["reclaimable"]
    if isinstance(reclaimable, dict):
        lines.append(f"retention would delete now: {reclaimable['retention_now']} bytes")
        how = "estimated" if reclaimable["compaction_estimated"] else "measured"
        lines.append(f"cleaning would free: {reclaimable['compaction']} bytes ({how})")
        if reclaimable["compaction_unestimated_bytes"]:
            lines.append(
                f"  and an unknown share of {reclaimable['compaction_unestimated_bytes']} bytes of compacted "
                "logs no daemon has sketched yet (--exact reads them)"
            )
    return lines


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0

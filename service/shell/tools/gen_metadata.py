"""``gen --metadata-log``: a small KRaft metadata log for the generated topics, so that the metadata log's
part in a topic's config (``docs/metadata-log.md``) can be seen without a broker.

For each generated topic it writes what a controller writes when ``kafka-topics.sh --create --config``
creates it: a ``TopicRecord`` with the id of the topic's ``partition.metadata``, a ``PartitionRecord`` per
partition assigned to this node, and a ``ConfigRecord`` per topic config the run was asked for. The log is
``<log dir>/__cluster_metadata-0/00000000000000000000.log``, with ``meta.properties`` (``node.id=1``) if the
dir has none. A later run appends its new topics and partitions (and changed configs) after the log's last
offset, in its last segment (a broker's metadata log included).

Crash behaviour: the segment and ``meta.properties`` are each replaced with ``write_atomically``, so a crash
leaves the old file or the new one, never a torn tail.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from service.metadata.image import MetadataImage, read_image
from service.metadata.log_reader import METADATA_PARTITION_DIR, MetadataLogFiles, find_metadata_log
from service.metadata.log_writer import MetadataRecordSpec, encode_metadata_batch
from service.metadata.meta_properties import META_PROPERTIES_FILE, read_node_id
from service.metadata.records import CONFIG_RECORD_KEY, PARTITION_RECORD_KEY, TOPIC_RECORD_KEY
from service.storage.atomic import write_atomically
from service.storage.file_records import iter_file_batches
from service.storage.log_files import LOG_SUFFIX, file_name, partition_dir_name
from service.storage.partition_files import load_topic_id
from service.storage.topic_partition import TopicPartition

__all__ = ["GEN_NODE_ID", "write_generated_metadata"]

GEN_NODE_ID = 1
_TOPIC_RESOURCE = 2


def write_generated_metadata(
    log_dir: Path, targets: Sequence[TopicPartition], configs: Mapping[str, str], *, now_ms: int
) -> None:
    """Record ``targets``' topics (ids from their ``partition.metadata``), partitions and ``configs``."""
    node_id = read_node_id(log_dir)
    if node_id is None:
        node_id = GEN_NODE_ID
        write_atomically(
            log_dir / META_PROPERTIES_FILE,
            f"version=1\ncluster.id={_cluster_id()}\nnode.id={node_id}\n".encode(),
        )
    directory = log_dir / METADATA_PARTITION_DIR
    directory.mkdir(exist_ok=True)
    files = find_metadata_log(log_dir)
    image = read_image(files) if files is not None else MetadataImage()
    specs = _new_records(log_dir, image, targets, configs, node_id)
    if not specs:
        return
    segment = _segment_to_append(directory, files, image.end_offset)
    existing = segment.read_bytes() if segment.exists() else b""
    batch = encode_metadata_batch(specs, base_offset=image.end_offset, timestamp=now_ms)
    write_atomically(segment, existing + batch)


def _segment_to_append(directory: Path, files: MetadataLogFiles | None, end_offset: int) -> Path:
    """The last segment when the next offset follows its last batch; else a new segment at
    ``end_offset`` (no segment yet, or a snapshot reaching past the last one, as Kafka leaves a log it
    truncated after a snapshot)."""
    if files is not None and files.segments and _next_offset(files.segments[-1]) == end_offset:
        return files.segments[-1]
    return directory / file_name(end_offset, LOG_SUFFIX)


def _next_offset(segment: Path) -> int:
    """The offset after the last batch of ``segment`` (its base offset when empty)."""
    next_offset = int(segment.name[:20])
    fd = os.open(segment, os.O_RDONLY)
    try:
        for batch in iter_file_batches(fd, 0, os.fstat(fd).st_size, path=str(segment)):
            next_offset = batch.next_offset
    finally:
        os.close(fd)
    return next_offset


def _new_records(
    log_dir: Path,
    image: MetadataImage,
    targets: Sequence[TopicPartition],
    configs: Mapping[str, str],
    node_id: int,
) -> list[MetadataRecordSpec]:
    specs: list[MetadataRecordSpec] = []
    for topic in sorted({tp.topic for tp in targets}):
        partitions = sorted(tp.partition for tp in targets if tp.topic == topic)
        topic_id = load_topic_id(log_dir / partition_dir_name(topic, partitions[0]))
        if topic_id is None:
            continue  # no id to tie the metadata to; the topic keeps logcleaner's defaults
        known = image.topics.get(topic)
        if known is None or known.topic_id != topic_id:
            specs.append(MetadataRecordSpec(TOPIC_RECORD_KEY, 0, {"name": topic, "topic_id": topic_id}))
            assigned: Mapping[int, tuple[int, ...]] = {}
        else:
            assigned = known.partitions
        specs += [_partition(topic_id, p, node_id) for p in partitions if p not in assigned]
        current = image.topic_configs.get(topic, {})
        specs += [
            MetadataRecordSpec(
                CONFIG_RECORD_KEY,
                0,
                {"resource_type": _TOPIC_RESOURCE, "resource_name": topic, "name": name, "value": value},
            )
            for name, value in sorted(configs.items())
            if current.get(name) != value
        ]
    return specs


def _partition(topic_id: str, partition: int, node_id: int) -> MetadataRecordSpec:
    fields = {
        "partition_id": partition,
        "topic_id": topic_id,
        "replicas": [node_id],
        "isr": [node_id],
        "removing_replicas": [],
        "adding_replicas": [],
        "leader": node_id,
        "leader_epoch": 0,
        "partition_epoch": 0,
    }
    return MetadataRecordSpec(PARTITION_RECORD_KEY, 0, fields)


def _cluster_id() -> str:
    """A cluster id in Kafka's form (a base64 UUID, 22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")

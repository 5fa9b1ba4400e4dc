"""Building KRaft metadata logs for tests: records per Kafka's schemas, segments and snapshots on disk."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from service.metadata.image import MetadataImage, MetadataImageBuilder
from service.metadata.log_reader import METADATA_PARTITION_DIR, find_metadata_log, read_metadata_log
from service.metadata.log_writer import (
    MetadataRecordSpec,
    encode_metadata_batch,
    encode_snapshot,
    snapshot_file_name,
)
from service.metadata.records import (
    CONFIG_RECORD_KEY,
    PARTITION_CHANGE_RECORD_KEY,
    PARTITION_RECORD_KEY,
    REMOVE_TOPIC_RECORD_KEY,
    TOPIC_RECORD_KEY,
)
from service.storage.message_schema import Field, Schema
from service.storage.partition_metadata import encode_topic_id, new_topic_id

NOW_MS = 1_700_000_000_000
NODE_ID = 1


def topic(name: str, topic_id: str) -> MetadataRecordSpec:
    return MetadataRecordSpec(TOPIC_RECORD_KEY, 0, {"name": name, "topic_id": topic_id})


def partition(topic_id: str, partition_id: int, replicas: Sequence[int] = (NODE_ID,)) -> MetadataRecordSpec:
    return MetadataRecordSpec(
        PARTITION_RECORD_KEY,
        1,
        {
            "partition_id": partition_id,
            "topic_id": topic_id,
            "replicas": list(replicas),
            "isr": list(replicas),
            "removing_replicas": [],
            "adding_replicas": [],
            "leader": replicas[0] if replicas else -1,
            "leader_epoch": 0,
            "partition_epoch": 0,
            "directories": [new_topic_id() for _ in replicas],
        },
    )


def partition_change(topic_id: str, partition_id: int, replicas: Sequence[int]) -> MetadataRecordSpec:
    fields = {"partition_id": partition_id, "topic_id": topic_id, "replicas": list(replicas)}
    return MetadataRecordSpec(PARTITION_CHANGE_RECORD_KEY, 0, fields)


def topic_config(name: str, key: str, value: str | None) -> MetadataRecordSpec:
    return MetadataRecordSpec(
        CONFIG_RECORD_KEY, 0, {"resource_type": 2, "resource_name": name, "name": key, "value": value}
    )


def broker_config(node: str, key: str, value: str | None) -> MetadataRecordSpec:
    """A dynamic broker config; ``node`` "" is the cluster default."""
    return MetadataRecordSpec(
        CONFIG_RECORD_KEY, 0, {"resource_type": 4, "resource_name": node, "name": key, "value": value}
    )


def remove_topic(topic_id: str) -> MetadataRecordSpec:
    return MetadataRecordSpec(REMOVE_TOPIC_RECORD_KEY, 0, {"topic_id": topic_id})


def metadata_dir(log_dir: Path, *, node_id: int | None = NODE_ID) -> Path:
    """``<log_dir>/__cluster_metadata-0`` (created), with ``meta.properties`` naming ``node_id``."""
    directory = log_dir / METADATA_PARTITION_DIR
    directory.mkdir(parents=True, exist_ok=True)
    if node_id is not None:
        (log_dir / "meta.properties").write_text(
            f"#\nversion=1\ncluster.id=Some4ClusterId5Here6789\nnode.id={node_id}\n"
            "directory.id=3fNQ6pvRSGGDTeXOZeMULw\n"
        )
    return directory


def write_segment(
    log_dir: Path, batches: Sequence[Sequence[MetadataRecordSpec]], *, base_offset: int = 0
) -> Path:
    """One segment ``<base_offset>.log`` of the metadata log holding ``batches``, offsets counted on."""
    path = metadata_dir(log_dir) / f"{base_offset:020d}.log"
    data = bytearray()
    offset = base_offset
    for specs in batches:
        data += encode_metadata_batch(specs, base_offset=offset, timestamp=NOW_MS)
        offset += len(specs)
    path.write_bytes(bytes(data))
    return path


def write_snapshot(log_dir: Path, specs: Sequence[MetadataRecordSpec], *, end_offset: int) -> Path:
    path = metadata_dir(log_dir) / snapshot_file_name(end_offset, 1)
    path.write_bytes(encode_snapshot(specs, timestamp=NOW_MS))
    return path


def sample_fields(schema: Schema, version: int) -> dict[str, object]:
    """A message of ``schema`` at ``version`` with every field set, none to its default (so each tagged
    field is written), values told apart by a running count: what a test writes of every kind."""
    counter = iter(range(1, 1_000_000))
    return _sample_struct(schema.fields, version, counter)


def _sample_struct(fields: tuple[Field, ...], version: int, counter: Iterator[int]) -> dict[str, object]:
    return {f.name: _sample_field(f, version, counter) for f in fields if f.in_version(version)}


def _sample_field(field: Field, version: int, counter: Iterator[int]) -> object:
    if field.is_array:
        return [_sample_value(field, version, counter) for _ in range(2)]
    return _sample_value(field, version, counter)


def _sample_value(field: Field, version: int, counter: Iterator[int]) -> object:
    n = next(counter)
    samples: dict[str, Callable[[], object]] = {
        "bool": lambda: field.default is not True,
        "float64": lambda: n + 0.25,
        "uuid": lambda: encode_topic_id(bytes([n % 256]) * 15 + bytes([n // 256])),
        "string": lambda: f"{field.name}-{n}",
        "bytes": lambda: bytes([n % 256, 0, 255]),
        "uint16": lambda: 9000 + n,
        "struct": lambda: _sample_struct(field.fields, version, counter),
    }
    return samples.get(field.type, lambda: n)()


def read_image(log_dir: Path) -> MetadataImage:
    files = find_metadata_log(log_dir)
    assert files is not None
    builder = MetadataImageBuilder()
    for entry in read_metadata_log(files):
        builder.replay(entry)
    return builder.build()

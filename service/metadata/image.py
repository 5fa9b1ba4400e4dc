"""The broker's view of the cluster built from its metadata log: topics, assignments and configs.

:class:`MetadataImageBuilder` replays metadata records in offset order as a broker's ``MetadataDelta``
does, keeping what logcleaner needs:

- ``TopicRecord`` adds a topic (name, id); ``PartitionRecord`` a partition, its replicas, leader and ISR;
  ``PartitionChangeRecord`` changes the replicas when its ``replicas`` is not null, the ISR when its
  ``isr`` is not null, the leader when its ``leader`` is not -2 (Kafka's ``NO_LEADER_CHANGE``);
- ``RemoveTopicRecord`` removes the topic, its partitions and its configs (the name is remembered in
  ``removed_topics`` until a topic of that name is created again);
- ``ConfigRecord`` of resource type TOPIC (2) sets or (null value) removes a topic config; of type
  BROKER (4) a dynamic broker config, an empty resource name being the cluster default;
- records between ``BeginTransactionRecord`` and ``EndTransactionRecord`` apply at the end, and are
  dropped by ``AbortTransactionRecord`` or when the log ends first (KIP-868);
- every other kind changes nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from service.base.errors import CorruptDataError
from service.config.config_layers import DynamicConfigs
from service.metadata.log_reader import MetadataEntry, MetadataLogFiles, read_metadata_log
from service.metadata.records import (
    ABORT_TRANSACTION_RECORD_KEY,
    BEGIN_TRANSACTION_RECORD_KEY,
    CONFIG_RECORD_KEY,
    END_TRANSACTION_RECORD_KEY,
    PARTITION_CHANGE_RECORD_KEY,
    PARTITION_RECORD_KEY,
    REMOVE_TOPIC_RECORD_KEY,
    TOPIC_RECORD_KEY,
)

__all__ = [
    "BROKER_RESOURCE",
    "TOPIC_RESOURCE",
    "MetadataImage",
    "MetadataImageBuilder",
    "PartitionLeadership",
    "TopicImage",
    "read_image",
]

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
_NO_LEADER_CHANGE = -2  # PartitionChangeRecord's default ``leader``: the leader stays


@dataclass(frozen=True, slots=True)
class PartitionLeadership:
    """A partition's leader (-1: none) and in-sync replicas, as the last record about it left them."""

    leader: int
    isr: tuple[int, ...]

    def is_led_alone_by(self, node_id: int) -> bool:
        """Whether ``node_id`` leads with no other in-sync replica: its log end is then the high watermark
        (Kafka ``Partition.makeLeader`` -> ``maybeIncrementLeaderHW``)."""
        return self.leader == node_id and self.isr == (node_id,)


@dataclass(frozen=True, slots=True)
class TopicImage:
    """A topic as the metadata has it: its id (Kafka's base64 form), each partition's replicas and each
    partition's leader and ISR."""

    name: str
    topic_id: str
    partitions: Mapping[int, tuple[int, ...]]
    leadership: Mapping[int, PartitionLeadership] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """Everything logcleaner reads from one metadata log, as of ``end_offset`` (the next offset)."""

    topics: Mapping[str, TopicImage] = field(default_factory=dict)
    removed_topics: Mapping[str, str] = field(default_factory=dict)
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    end_offset: int = 0

    def dynamic_configs(self, node_id: int | None) -> DynamicConfigs:
        """The config layers for this broker (``node_id`` None: the cluster default only)."""
        node = self.broker_configs.get(str(node_id), {}) if node_id is not None else {}
        return DynamicConfigs.checked(self.topic_configs, node, self.broker_configs.get("", {}))


class MetadataImageBuilder:
    """Replays entries into an image (not shared between threads). A builder may go on replaying after
    ``build``, as a broker applies the records appended since (``MetadataSource``'s re-read): ``build``
    then makes anew only the topics and configs the entries since the last ``build`` touched (``_dirty``,
    ``_dirty_configs``), and shares the others with the image it built before, so an image costs what
    changed, not the whole cluster. A transaction still open is carried on (KIP-868: its records apply at
    its end), and left out of every image built before it."""

    def __init__(self, *, end_offset: int = 0) -> None:
        """``end_offset``: where the log stands before the first entry (a snapshot's end offset)."""
        self._built: dict[str, TopicImage] = {}  # the topic images of the last build, by name
        self._built_order: list[str] = []  # their names, sorted
        self._built_configs: dict[str, dict[str, str]] = {}  # the topic configs of the last build
        self._dirty: set[str] = set()  # topics touched since the last build
        self._dirty_configs: set[str] = set()  # topics whose configs were touched since
        self._topics: dict[str, tuple[str, dict[int, tuple[int, ...]]]] = {}  # name → (id, partitions)
        self._names_by_id: dict[str, str] = {}
        self._leadership: dict[str, dict[int, PartitionLeadership]] = {}  # name → partition → leadership
        self._removed: dict[str, str] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._pending: list[MetadataEntry] | None = None  # inside a metadata transaction
        self._end_offset = end_offset

    def replay(self, entry: MetadataEntry) -> None:
        if not entry.in_snapshot:
            self._end_offset = max(self._end_offset, entry.offset + 1)
        key = entry.record.api_key
        if key == BEGIN_TRANSACTION_RECORD_KEY:
            self._pending = []
        elif key == END_TRANSACTION_RECORD_KEY:
            pending, self._pending = self._pending or [], None
            for inner in pending:
                self._apply(inner)
        elif key == ABORT_TRANSACTION_RECORD_KEY:
            self._pending = None
        elif self._pending is not None:
            self._pending.append(entry)
        else:
            self._apply(entry)

    def build(self) -> MetadataImage:
        names_changed = False
        for name in self._dirty:
            entry = self._topics.get(name)
            names_changed |= (entry is None) == (name in self._built)
            if entry is None:
                self._built.pop(name, None)
            else:
                topic_id, partitions = entry
                self._built[name] = TopicImage(
                    name, topic_id, dict(partitions), dict(self._leadership.get(name, {}))
                )
        for topic in self._dirty_configs:
            configs = self._topic_configs.get(topic)
            if configs:
                self._built_configs[topic] = dict(configs)
            else:
                self._built_configs.pop(topic, None)
        self._dirty.clear()
        self._dirty_configs.clear()
        if names_changed:
            self._built_order = sorted(self._built)
        return MetadataImage(
            {name: self._built[name] for name in self._built_order},
            dict(self._removed),
            dict(self._built_configs),
            {name: dict(configs) for name, configs in self._broker_configs.items() if configs},
            self._end_offset,
        )

    def _apply(self, entry: MetadataEntry) -> None:
        fields = entry.record.fields
        if fields is None:
            return
        key = entry.record.api_key
        if key == TOPIC_RECORD_KEY:
            name, topic_id = str(fields["name"]), str(fields["topic_id"])
            if name in self._topics:  # a new incarnation: records naming the old id no longer reach it
                self._names_by_id.pop(self._topics[name][0], None)
            self._topics[name] = (topic_id, {})
            self._leadership[name] = {}
            self._dirty.add(name)
            self._names_by_id[topic_id] = name
            self._removed.pop(name, None)
        elif key == PARTITION_RECORD_KEY:
            partition = _int(fields["partition_id"])
            self._partitions_of(entry, fields)[partition] = _replicas(fields["replicas"])
            self._leadership_of(fields)[partition] = PartitionLeadership(
                _int(fields["leader"]), _replicas(fields["isr"])
            )
        elif key == PARTITION_CHANGE_RECORD_KEY:
            self._apply_partition_change(entry, fields)
        elif key == REMOVE_TOPIC_RECORD_KEY:
            self._remove_topic(entry, str(fields["topic_id"]))
        elif key == CONFIG_RECORD_KEY:
            self._apply_config(fields)

    def _apply_partition_change(self, entry: MetadataEntry, fields: Mapping[str, object]) -> None:
        partition = _int(fields["partition_id"])
        partitions = self._partitions_of(entry, fields)
        if fields["replicas"] is not None:
            partitions[partition] = _replicas(fields["replicas"])
        leadership = self._leadership_of(fields)
        before = leadership.get(partition, PartitionLeadership(-1, ()))
        leader = _int(fields["leader"])
        leadership[partition] = PartitionLeadership(
            before.leader if leader == _NO_LEADER_CHANGE else leader,
            before.isr if fields["isr"] is None else _replicas(fields["isr"]),
        )

    def _leadership_of(self, fields: Mapping[str, object]) -> dict[int, PartitionLeadership]:
        """The leadership map of the topic ``fields`` names (``_partitions_of`` checked it exists)."""
        name = self._names_by_id[str(fields["topic_id"])]
        self._dirty.add(name)
        return self._leadership[name]

    def _remove_topic(self, entry: MetadataEntry, topic_id: str) -> None:
        name = self._names_by_id.get(topic_id)
        if name is None:
            raise _unknown_topic(entry, topic_id)
        del self._names_by_id[topic_id], self._topics[name], self._leadership[name]
        self._topic_configs.pop(name, None)  # a broker's MetadataDelta drops the topic's configs with it
        self._dirty.add(name)
        self._dirty_configs.add(name)
        self._removed[name] = topic_id

    def _apply_config(self, fields: Mapping[str, object]) -> None:
        resource_type = fields["resource_type"]
        if resource_type == TOPIC_RESOURCE:
            configs = self._topic_configs.setdefault(str(fields["resource_name"]), {})
            self._dirty_configs.add(str(fields["resource_name"]))
        elif resource_type == BROKER_RESOURCE:
            configs = self._broker_configs.setdefault(str(fields["resource_name"]), {})
        else:
            return  # client metrics, groups, broker loggers: nothing logcleaner uses
        name, value = str(fields["name"]), fields["value"]
        if value is None:
            configs.pop(name, None)
        else:
            configs[name] = str(value)

    def _partitions_of(
        self, entry: MetadataEntry, fields: Mapping[str, object]
    ) -> dict[int, tuple[int, ...]]:
        topic_id = str(fields["topic_id"])
        name = self._names_by_id.get(topic_id)
        if name is None:
            raise _unknown_topic(entry, topic_id)
        self._dirty.add(name)
        return self._topics[name][1]


def _unknown_topic(entry: MetadataEntry, topic_id: str) -> CorruptDataError:
    return CorruptDataError(
        f"{entry.record.kind} at offset {entry.offset} names topic id {topic_id}, which no TopicRecord "
        "before it created",
        path=entry.path,
        position=entry.position,
    )


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"expected an int, got {value!r}")
    return value


def _replicas(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list of replicas, got {value!r}")
    return tuple(_int(v) for v in value)


def read_image(files: MetadataLogFiles) -> MetadataImage:
    """The image a metadata log holds: its snapshot's records, then its segments' after it, replayed."""
    builder = MetadataImageBuilder(end_offset=files.snapshot_end_offset)
    for entry in read_metadata_log(files):
        builder.replay(entry)
    return builder.build()

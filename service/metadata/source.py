"""The metadata log as logcleaner's processes see it: read once, read on when its files change.

A broker's metadata log dir (``metadata.log.dir``, else the first of ``log.dirs``) holds
``meta.properties`` (this broker's ``node.id``) and ``__cluster_metadata-0``. A dir without the latter is
a ZooKeeper-era dir (or not a broker's at all): there is no metadata, and topics fall under logcleaner's
overrides and the broker config, as before. ``metadata.log.ignore=true`` makes every dir read that way.

A metadata log that cannot be read (corrupt, truncated before its end, an unknown record version) raises
``CorruptDataError`` naming the file and byte position: applying the broker defaults instead would
silently delete a compacted topic by time. A running daemon keeps the last image it read and logs the
error until the files are readable again.

A change read on (``load_if_changed``) replays only the records appended since the last reading
(``tail.MetadataLogTail``): a broker's one config change costs its own batch, not the whole log again
(at 100,000 partitions a whole reading takes seconds). A new snapshot, a segment replaced or truncated, a
file gone, or a ``meta.properties`` changed make it read the whole log, as the first reading does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path

from service.config.broker_config import BrokerConfig
from service.config.config_layers import INTERNAL_TOPICS, NO_DYNAMIC_CONFIGS, DynamicConfigs
from service.core.stray_replicas import KnownTopics
from service.metadata.image import MetadataImage
from service.metadata.log_reader import METADATA_PARTITION_DIR, MetadataLogFiles, find_metadata_log
from service.metadata.meta_properties import META_PROPERTIES_FILE, read_node_id
from service.metadata.tail import MetadataLogTail
from service.storage.topic_partition import TopicPartition

__all__ = ["MetadataSource"]

logger = logging.getLogger(__name__)

_Stamp = tuple[tuple[str, int, int], ...]


class MetadataSource:
    """The owner of the current image. ``_lock`` guards ``_image``, ``_node_id``, ``_dynamic``, ``_stamp``,
    ``_configs_unknown`` and ``_known``; readers get immutable values, so a reload never shows them
    half-applied.
    ``_tail`` (what the last reading built, and where it stopped) is used only by the thread that loads:
    ``load`` and ``load_if_changed`` are called by one thread at a time (start-up, then the refresh task).

    On a broker's dir (its ``meta.properties`` names a ``node.id``/``broker.id``) whose metadata log is not
    found, a ZooKeeper-era broker's copy or a KRaft one whose ``metadata.log.dir`` was not given, the topics'
    own configs are unknown: they live elsewhere. With ``unknown.topic.configs=hold`` (the default) such a
    topic is held (``topic_configs_unknown``) until logcleaner has an override for it. A dir logcleaner made
    (no ``meta.properties``) and ``metadata.log.ignore=true`` keep the broker config's values."""

    def __init__(self, broker: BrokerConfig) -> None:
        self._dir = Path(broker.metadata_log_path)
        self._ignored = broker.metadata_log_ignore
        self._holds_unknown_configs = broker.unknown_topic_configs == "hold"
        self._configs_unknown = False  # a broker's dir whose metadata log is not found, and "hold"
        self._lock = threading.Lock()
        self._image: MetadataImage | None = None
        self._node_id: int | None = None
        self._dynamic = NO_DYNAMIC_CONFIGS
        self._stamp: _Stamp | None = None
        self._tail: MetadataLogTail | None = None
        self._known: tuple[MetadataImage, int | None, KnownTopics] | None = None  # known_topics() of an image

    @property
    def metadata_log_dir(self) -> Path:
        return self._dir

    @property
    def image(self) -> MetadataImage | None:
        """The last image read; None without a metadata log (or with ``metadata.log.ignore=true``)."""
        with self._lock:
            return self._image

    @property
    def node_id(self) -> int | None:
        with self._lock:
            return self._node_id

    @property
    def dynamic_configs(self) -> DynamicConfigs:
        with self._lock:
            return self._dynamic

    def topic_configs_unknown(self, topic: str, *, known_to_logcleaner: bool) -> bool:
        """Whether ``topic``'s configs are unknown: on such a dir (class docstring), a topic that neither
        logcleaner's topic store (``known_to_logcleaner``: overrides, or described by an import) nor Kafka's
        internal-topic defaults cover."""
        with self._lock:
            unknown = self._configs_unknown
        return unknown and not known_to_logcleaner and topic not in INTERNAL_TOPICS

    def known_topics(self) -> KnownTopics | None:
        """What the metadata knows for Kafka's ``isStrayKraftReplica``: each topic's id, the partitions
        assigned to this node (None without a node id) and the deleted topics, and the partitions this node
        leads alone (their high watermark at load); None without metadata."""
        with self._lock:
            image, node_id, known = self._image, self._node_id, self._known
        if image is None:
            return None
        if known is not None and known[0] is image and known[1] == node_id:
            return known[2]  # the same image: at 100,000 partitions the sets below take about a second
        assigned = None
        led_alone: frozenset[TopicPartition] = frozenset()
        if node_id is not None:
            assigned = frozenset(
                TopicPartition(name, partition)
                for name, topic in image.topics.items()
                for partition, replicas in topic.partitions.items()
                if node_id in replicas
            )
            led_alone = frozenset(
                TopicPartition(name, partition)
                for name, topic in image.topics.items()
                for partition, leadership in topic.leadership.items()
                if leadership.is_led_alone_by(node_id)
            )
        topic_ids = {name: topic.topic_id for name, topic in image.topics.items()}
        result = KnownTopics(topic_ids, assigned, dict(image.removed_topics), led_alone)
        with self._lock:
            self._known = (image, node_id, result)
        return result

    def load(self) -> None:
        """(Re)read the whole metadata log; ``CorruptDataError`` (file, position) if it cannot be read."""
        if self._ignored:
            return
        stamp = self._stamps()
        node_id = read_node_id(self._dir)
        files = find_metadata_log(self._dir)
        configs_unknown = self._holds_unknown_configs and node_id is not None and files is None
        image: MetadataImage | None = None
        self._tail = None
        if files is not None:
            self._tail, image = MetadataLogTail.read_all(files)
            if node_id is None:
                logger.warning(
                    "%s has no node.id: only the cluster-wide dynamic broker configs apply",
                    self._dir / META_PROPERTIES_FILE,
                )
        dynamic = image.dynamic_configs(node_id) if image is not None else NO_DYNAMIC_CONFIGS
        with self._lock:
            self._image, self._node_id, self._dynamic, self._stamp = image, node_id, dynamic, stamp
            self._configs_unknown = configs_unknown
        if image is not None:
            logger.info(
                "Read the metadata log %s up to offset %d: %d topics, %d with configs",
                self._dir / METADATA_PARTITION_DIR,
                image.end_offset,
                len(image.topics),
                len(image.topic_configs),
            )

    def load_if_changed(self) -> bool:
        """Read on if a file of the metadata log changed since the last read (a ``listdir`` and a few
        ``stat`` calls when none did): only the records appended since, else the whole log (module
        docstring); return whether a file changed. Errors propagate, the old image stays."""
        if self._ignored:
            return False
        stamp = self._stamps()
        with self._lock:
            before = self._stamp
        if before is not None and before == stamp:
            return False
        if not self._read_on(before, stamp):
            self.load()
        return True

    def _read_on(self, before: _Stamp | None, stamp: _Stamp) -> bool:
        """Apply the records appended since the last reading; False when the whole log must be read."""
        tail = self._tail
        meta = str(self._dir / META_PROPERTIES_FILE)
        if tail is None or before is None or _stamp_of(before, meta) != _stamp_of(stamp, meta):
            return False
        files = find_metadata_log(self._dir)
        if files is None:
            return False
        try:
            image = tail.read_on(files)
        except BaseException:
            self._tail = None  # it may hold part of the new records: the next reading reads all
            raise
        if image is None:
            return False
        self._publish(image, files, stamp)
        return True

    def _publish(self, image: MetadataImage, files: MetadataLogFiles, stamp: _Stamp) -> None:
        with self._lock:
            node_id = self._node_id
            dynamic = image.dynamic_configs(node_id)
            self._image, self._dynamic, self._stamp = image, dynamic, stamp
        logger.info(
            "Read the metadata log %s on up to offset %d: %d topics, %d with configs",
            files.directory,
            image.end_offset,
            len(image.topics),
            len(image.topic_configs),
        )

    def _stamps(self) -> _Stamp:
        """(name, size, mtime) of meta.properties and every file of the metadata log, sorted."""
        stamps: list[tuple[str, int, int]] = []
        candidates = [self._dir / META_PROPERTIES_FILE]
        log_dir = self._dir / METADATA_PARTITION_DIR
        with contextlib.suppress(OSError):  # no metadata log (yet): only meta.properties counts
            candidates += [log_dir / name for name in os.listdir(log_dir)]
        for path in candidates:
            try:
                stat = path.stat()
            except OSError:
                continue
            stamps.append((str(path), stat.st_size, stat.st_mtime_ns))
        return tuple(sorted(stamps))


def _stamp_of(stamps: _Stamp, path: str) -> tuple[str, int, int] | None:
    return next((stamp for stamp in stamps if stamp[0] == path), None)

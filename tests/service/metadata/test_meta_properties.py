"""``read_node_id``: the broker that owns a log dir, from its ``meta.properties`` as Kafka's
``MetaProperties`` writes it: ``node.id`` (KRaft), else ``broker.id`` (ZooKeeper era); none when the dir
was never a broker's; a value that is not an integer is corrupt data naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.errors import CorruptDataError
from service.metadata.meta_properties import META_PROPERTIES_FILE, read_node_id

KRAFT = "#\n#Thu Nov 28 02:32:07 UTC 2026\nnode.id=3\ndirectory.id=3fNQ6pvRSGGDTeXOZeMULw\nversion=1\n"
ZOOKEEPER = "#\nversion=0\nbroker.id=7\ncluster.id=Some4ClusterId5Here6789\n"


@pytest.mark.parametrize(
    ("content", "node_id"),
    [
        (KRAFT, 3),
        (ZOOKEEPER, 7),
        ("node.id=3\nbroker.id=7\n", 3),  # node.id first
        ("node.id = 12  \n", 12),  # spaces around the value
        ("version=1\ncluster.id=x\n", None),  # neither key
        ("", None),
    ],
)
def test_the_node_id_is_read(tmp_path: Path, content: str, node_id: int | None) -> None:
    (tmp_path / META_PROPERTIES_FILE).write_text(content)
    assert read_node_id(tmp_path) == node_id


def test_a_dir_without_meta_properties_was_never_a_brokers(tmp_path: Path) -> None:
    assert read_node_id(tmp_path) is None
    (tmp_path / META_PROPERTIES_FILE).mkdir()
    assert read_node_id(tmp_path) is None, "not a file"


def test_a_node_id_that_is_not_an_integer_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / META_PROPERTIES_FILE
    path.write_text("node.id=three\n")
    with pytest.raises(CorruptDataError, match=r"node\.id 'three' is not an integer") as info:
        read_node_id(tmp_path)
    assert info.value.path == str(path)

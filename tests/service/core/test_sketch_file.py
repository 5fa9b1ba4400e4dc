"""``sketch_file``: the log dir's ``.logcleaner-key-sketches.json`` as the daemon writes it and
``explain --summary`` reads it: the documented layout, a missing file read as no sketches, and any other
content refused with a ``ValueError`` naming the file (an unreadable one raises ``OSError``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.core.key_sketch import KeySketch, SegmentSketch
from service.core.sketch_file import SKETCH_FILE, read_sketch_file, sketch_entry_name, write_sketch_file


def keys(count: int) -> KeySketch:
    sketch = KeySketch()
    for i in range(count):
        sketch.add(b"k%d" % i)
    return sketch


def test_sketches_round_trip_through_the_sketch_file(tmp_path: Path) -> None:
    """Sparse and dense sketches come back equal (counts, hashes, registers)."""
    small, large = keys(10), keys(5000)
    entries = {"t-0/0": SegmentSketch(100, 2, 10, small), "t-0/10": SegmentSketch(9000, 50, 5000, large)}
    write_sketch_file(tmp_path, entries)
    assert read_sketch_file(tmp_path) == entries
    assert abs(large.cardinality() - 5000) < 0.05 * 5000


def test_the_layout_is_the_documented_one(tmp_path: Path) -> None:
    write_sketch_file(tmp_path, {sketch_entry_name("orders-3", 120): SegmentSketch(70, 1, 1, keys(1))})
    document = json.loads((tmp_path / SKETCH_FILE).read_bytes())
    assert document["version"] == 1
    assert list(document["segments"]) == ["orders-3/120"]
    assert document["segments"]["orders-3/120"]["size"] == 70
    assert sorted(p.name for p in tmp_path.iterdir()) == [SKETCH_FILE], "written atomically: no .tmp left"


def test_a_rewrite_replaces_every_entry(tmp_path: Path) -> None:
    write_sketch_file(tmp_path, {"t-0/0": SegmentSketch(1, 1, 1, keys(1))})
    write_sketch_file(tmp_path, {"t-1/5": SegmentSketch(2, 1, 1, keys(1))})
    assert list(read_sketch_file(tmp_path)) == ["t-1/5"]


def test_a_missing_file_is_no_sketches(tmp_path: Path) -> None:
    assert read_sketch_file(tmp_path) == {}
    assert read_sketch_file(tmp_path / "nowhere") == {}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "Expecting property name"),
        (b"[]", "expected version 1"),
        (b'{"version": 2, "segments": {}}', "expected version 1"),
        (b'{"version": 1}', "no segments object"),
        (b'{"version": 1, "segments": []}', "no segments object"),
        (b'{"version": 1, "segments": {"t-0/0": {"size": -1}}}', "are counts"),
        (
            b'{"version": 1, "segments": {"t-0/0": {"size": 1, "batches": 1, "records": 1, '
            b'"registers": "!!"}}}',
            "Only base64 data",
        ),
        (b'{"version": "\xc3\x28"}', "can't decode byte 0xc3"),  # not UTF-8
    ],
)
def test_other_content_is_refused_naming_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    (tmp_path / SKETCH_FILE).write_bytes(content)
    with pytest.raises(ValueError, match="not a key sketch file") as info:
        read_sketch_file(tmp_path)
    assert str(tmp_path / SKETCH_FILE) in str(info.value)
    assert info.match(reason), "and says what is wrong"


def test_a_file_that_cannot_be_read_raises_os_error(tmp_path: Path) -> None:
    (tmp_path / SKETCH_FILE).mkdir()
    with pytest.raises(IsADirectoryError):
        read_sketch_file(tmp_path)

"""logcleaner's own file of key sketches, one per log dir (``.logcleaner-key-sketches.json`` beside the
checkpoint files, never in a partition dir).

The daemon writes it, atomically, after a summary refresh that sketched new segments
(``service.core.summary_cache``); offline ``explain --summary`` reads it to estimate compaction without
reading a record. Layout: ``{"version": 1, "segments": {"<partition dir>/<base offset>": <sketch>}}`` with
each sketch as ``key_sketch.encode_sketch`` writes it; an entry whose size is not the segment's any more
(cleaned, truncated) is stale and not used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from service.core.key_sketch import SegmentSketch, decode_sketch, encode_sketch
from service.storage.atomic import write_atomically

__all__ = ["SKETCH_FILE", "read_sketch_file", "sketch_entry_name", "write_sketch_file"]

SKETCH_FILE = ".logcleaner-key-sketches.json"
_VERSION = 1


def sketch_entry_name(partition_dir_name: str, base_offset: int) -> str:
    return f"{partition_dir_name}/{base_offset}"


def write_sketch_file(log_dir: Path, entries: Mapping[str, SegmentSketch]) -> None:
    document = {"version": _VERSION, "segments": {name: encode_sketch(s) for name, s in entries.items()}}
    write_atomically(log_dir / SKETCH_FILE, json.dumps(document, separators=(",", ":")).encode())


def read_sketch_file(log_dir: Path) -> dict[str, SegmentSketch]:
    """The log dir's sketches; none if the file is missing. Raises ``OSError`` if it cannot be read and
    ``ValueError`` naming the file if its content is not what :func:`write_sketch_file` writes."""
    path = log_dir / SKETCH_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        document = json.loads(data)
        if not isinstance(document, dict) or document.get("version") != _VERSION:
            raise ValueError(f"expected version {_VERSION}")
        segments = document.get("segments")
        if not isinstance(segments, dict):
            raise ValueError("no segments object")
        return {str(name): decode_sketch(doc) for name, doc in segments.items()}
    except ValueError as exc:  # json.JSONDecodeError and binascii.Error are ValueErrors
        raise ValueError(f"{path}: not a key sketch file ({exc})") from exc

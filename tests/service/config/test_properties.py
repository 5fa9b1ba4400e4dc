"""``server.properties`` as Java's ``Properties.load`` reads it, and ``--override key=value`` pairs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.config.properties import parse_overrides, read_properties, read_properties_checked
from tests.paths import REPO


def test_java_properties_syntax(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(
        b"# a comment\n"
        b"! another comment\n"
        b"log.dirs=/data/a,\\\n"
        b"    /data/b\n"
        b"log.retention.hours : 168\n"
        b"num.partitions 3\n"
        b"broker.rack=caf\xe9\n"  # ISO-8859-1, as Java reads it
    )
    assert read_properties(path) == {
        "log.dirs": "/data/a,/data/b",
        "log.retention.hours": "168",
        "num.partitions": "3",
        "broker.rack": "café",
    }


def test_a_value_ending_in_what_looks_like_a_comment_is_kept_and_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# header\nlog.dirs=/data/logs   # the disk\nnum.partitions=3\n")
    properties, warnings = read_properties_checked(path)
    assert properties["log.dirs"] == "/data/logs   # the disk"  # what Kafka reads
    [warning] = warnings
    assert f"config file {path}, line 2: the value of 'log.dirs'" in warning
    assert "'# the disk'" in warning


def test_no_file_no_properties_and_a_missing_file_named(tmp_path: Path) -> None:
    assert read_properties_checked(None) == ({}, [])
    with pytest.raises(InvalidInputError, match=f"config file {tmp_path / 'nope'} does not exist"):
        read_properties(tmp_path / "nope")
    with pytest.raises(InvalidInputError, match="cannot be read"):
        read_properties(tmp_path)  # a directory


def test_overrides_are_key_value_pairs() -> None:
    assert parse_overrides([" log.dirs = /a ", "x=", "y=a=b"]) == {"log.dirs": "/a", "x": "", "y": "a=b"}
    for bad in ("no-equals", "=value", " =value"):
        with pytest.raises(InvalidInputError, match="is not of the form key=value"):
            parse_overrides([bad])


def test_the_properties_parser_is_imported_only_to_read_a_file(tmp_path: Path) -> None:
    """Its package pulls in an XML reader, urllib and http: a command run without a file does not pay."""
    path = tmp_path / "server.properties"
    path.write_text("log.dirs=/data\n")
    probe = (
        "import sys\nimport service.shell.cli\nfrom service.config.properties import read_properties\n"
        "before = 'javaproperties' in sys.modules\n"
        f"read_properties(__import__('pathlib').Path({str(path)!r}))\n"
        "print(before, 'javaproperties' in sys.modules)"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert found.stdout.split() == ["False", "True"], found.stderr

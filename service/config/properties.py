"""Reading a ``server.properties`` file (Java properties syntax) plus ``--override key=value`` pairs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from service.base.errors import InvalidInputError

__all__ = ["parse_overrides", "read_properties", "read_properties_checked"]

_INLINE_COMMENT = re.compile(r"\s(#.*)$")


def read_properties(path: Path | None) -> dict[str, str]:
    """The key/value pairs of a properties file (``#``/``!`` comments, ``=``/``:``, continuations)."""
    return read_properties_checked(path)[0]


def read_properties_checked(path: Path | None) -> tuple[dict[str, str], list[str]]:
    """The key/value pairs of a properties file, and a warning for each value that seems to end in a comment.

    Java properties have no inline comments: ``log.dirs=/data/logs   # the disk`` sets ``log.dirs`` to all of
    ``/data/logs   # the disk``. Such a value is kept (it is what Kafka would read) but named with its line.
    """
    if path is None:
        return {}, []
    # Imported here: the package imports an XML reader and, through it, urllib and http (40 ms of every
    # command's start), which a run without a properties file never needs.
    import javaproperties

    try:
        with open(path, encoding="latin-1") as f:  # Java's Properties.load reads ISO-8859-1
            elements = list(javaproperties.parse(f))
    except FileNotFoundError as exc:
        raise InvalidInputError(f"config file {path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"config file {path} cannot be read: {exc}") from exc
    properties: dict[str, str] = {}
    warnings = []
    line = 1
    for element in elements:
        if isinstance(element, javaproperties.KeyValue):
            properties[element.key] = element.value
            comment = _INLINE_COMMENT.search(element.value)
            if comment is not None:
                warnings.append(
                    f"config file {path}, line {line}: the value of {element.key!r} is {element.value!r}, "
                    f"which ends in what looks like a comment ({comment.group(1)!r}); a properties file "
                    "keeps it as part of the value: put comments on lines of their own"
                )
        line += element.source.count("\n")
    return properties, warnings


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``key=value`` strings from ``--override``, as Kafka's start script takes them."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"--override {pair!r} is not of the form key=value")
        overrides[key.strip()] = value.strip()
    return overrides

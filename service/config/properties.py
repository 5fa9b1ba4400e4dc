"""Reading a ``server.properties`` file (Java properties syntax) plus ``--override key=value`` pairs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import javaproperties

from service.errors import InvalidInputError

__all__ = ["parse_overrides", "read_properties"]


def read_properties(path: Path | None) -> dict[str, str]:
    """The key/value pairs of a properties file (``#``/``!`` comments, ``=``/``:``, continuations)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="latin-1") as f:  # Java's Properties.load reads ISO-8859-1
            return dict(javaproperties.load(f))
    except FileNotFoundError as exc:
        raise InvalidInputError(f"config file {path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"config file {path} cannot be read: {exc}") from exc


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``key=value`` strings from ``--override``, as Kafka's start script takes them."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"--override {pair!r} is not of the form key=value")
        overrides[key.strip()] = value.strip()
    return overrides

"""``--json`` documents laid out as ``json.dumps(document, indent=2)`` lays them out, only faster.

Python's own encoder runs in C only without ``indent``; with it, every value goes through nested Python
generators, which at 10,000 partitions made the indented ``explain`` document cost more than explaining
them. :func:`dumps_indented` writes the same text: each run of scalar members of an object (most of a
document) goes through the C encoder at once, with the line break and indentation of its depth as the item
separator, and only the nesting is walked in Python. A document holding anything but plain JSON values (a
key that is not a string, an object of another type) is handed to ``json.dumps`` whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]

__all__ = ["dumps_indented", "dumps_indented_items", "indented_array_document"]

_INDENT = "  "
_SCALARS = frozenset((str, int, float, bool, type(None)))
_CONTAINERS = frozenset((dict, list, tuple))


class _NotPlain(Exception):
    """A value ``json.dumps`` would have to convert: the whole document goes to it instead."""


def dumps_indented(document: object) -> str:
    """Exactly ``json.dumps(document, indent=2)``."""
    if c_make_encoder is None:  # a Python built without the _json accelerator
        return json.dumps(document, indent=2)
    parts: list[str] = []
    try:
        _encode(document, parts, "\n")
    except _NotPlain:
        return json.dumps(document, indent=2)
    return "".join(parts)


def dumps_indented_items(items: list[object], depth: int) -> str:
    """The items of an array ``depth`` levels deep, as ``json.dumps(indent=2)`` lays them out between its
    brackets (one after the other, a comma and a line break between them, no bracket); "" for none. Parts
    of one array written apart (by the processes of a split inspection) join with ``",\n"``. Each item is
    written at its own depth, in one join: no copy of the whole text is cut or re-indented after."""
    if not items:
        return ""
    newline = "\n" + _INDENT * (depth + 1)
    parts = [newline[1:]]
    try:
        if c_make_encoder is None:  # a Python built without the _json accelerator
            raise _NotPlain
        for n, item in enumerate(items):
            if n:
                parts.append("," + newline)
            _encode(item, parts, newline)
    except _NotPlain:
        text = json.dumps(items, indent=2)  # "[\n  item,\n  item\n]": no line break inside a string's text
        indent = _INDENT * depth
        return indent + text[2:-2].replace("\n", "\n" + indent) if depth else text[2:-2]
    return "".join(parts)


def indented_array_document(key: str, parts: list[str], *, before: Mapping[str, object] | None = None) -> str:
    """``dumps_indented({**before, key: items})`` from the parts ``dumps_indented_items(…, depth=1)`` wrote of
    them; ``before``'s members come first. The parts (tens of MiB at a broker's worth of partitions) are
    copied once, by one join."""
    pieces = ["{\n"]
    for name, value in (before or {}).items():
        member = dumps_indented(value).replace("\n", "\n" + _INDENT)  # small: re-indented whole
        pieces += (_INDENT, encode_basestring_ascii(name), ": ", member, ",\n")
    pieces += (_INDENT, encode_basestring_ascii(key), ": ")
    items = [part for part in parts if part]
    if items:
        pieces.append("[\n")
        for n, part in enumerate(items):
            pieces += (",\n", part) if n else (part,)
        pieces.append("\n" + _INDENT + "]")
    else:
        pieces.append("[]")
    pieces.append("\n}")
    return "".join(pieces)


def _not_plain(value: object) -> object:
    raise _NotPlain


@lru_cache(maxsize=64)
def _scalars_encoder(inner: str) -> Callable[[object], str]:
    """The C encoder writing an object's scalar members one to a line, ``inner`` (a line break and the
    members' indentation) between them; its braces are cut off and laid out by the caller. Made once per
    depth: ``JSONEncoder.encode`` would make it again for every object."""
    encoder = c_make_encoder(
        None, _not_plain, encode_basestring_ascii, None, ": ", "," + inner, False, False, True
    )

    def encode(members: object) -> str:
        return "".join(encoder(members, 0))

    return encode


def _encode(value: object, parts: list[str], newline: str) -> None:
    """Append ``value``'s text; ``newline`` is the line break and indentation of the line it is on."""
    kind = type(value)
    if kind is dict:
        _encode_dict(value, parts, newline)  # type: ignore[arg-type]  # kind is dict: value is one
    elif kind is list or kind is tuple:
        _encode_list(value, parts, newline)  # type: ignore[arg-type]  # kind is list or tuple
    elif kind in _SCALARS:
        parts.append(json.dumps(value))
    else:
        raise _NotPlain


def _encode_dict(value: dict[object, object], parts: list[str], newline: str) -> None:
    if not value:
        parts.append("{}")
        return
    inner = newline + _INDENT
    encode = _scalars_encoder(inner)
    if _SCALARS.issuperset(map(type, value.values())):  # no nesting: the whole object in one call
        parts.append("{" + inner + encode(value)[1:-1] + newline + "}")
        return
    run: dict[str, object] = {}  # the scalar members since the last nested one
    separator = "{" + inner
    for key, item in value.items():
        kind = type(item)
        if type(key) is not str:
            raise _NotPlain
        if kind in _SCALARS:
            run[key] = item
            continue
        if kind not in _CONTAINERS:
            raise _NotPlain
        if run:
            parts.append(separator + encode(run)[1:-1])
            run = {}
            separator = "," + inner
        parts.append(separator + encode_basestring_ascii(key) + ": ")
        _encode(item, parts, inner)
        separator = "," + inner
    if run:
        parts.append(separator + encode(run)[1:-1])
    parts.append(newline + "}")


def _encode_list(value: list[object] | tuple[object, ...], parts: list[str], newline: str) -> None:
    if not value:
        parts.append("[]")
        return
    inner = newline + _INDENT
    separator = "[" + inner
    for item in value:
        parts.append(separator)
        _encode(item, parts, inner)
        separator = "," + inner
    parts.append(newline + "]")

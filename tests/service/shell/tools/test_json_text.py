"""``dumps_indented`` writes exactly what ``json.dumps(document, indent=2)`` writes."""

from __future__ import annotations

import enum
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.shell.tools.json_text import dumps_indented, dumps_indented_items, indented_array_document

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
documents = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=30,
)


@given(documents)
def test_any_plain_document_is_laid_out_as_json_dumps_indent_2(document: object) -> None:
    assert dumps_indented(document) == json.dumps(document, indent=2)


def test_an_explain_document_with_nesting_between_scalars() -> None:
    document = {
        "partitions": [
            {
                "topic": "t\u00e9-\u2603",
                "partition": 0,
                "topic_id": None,
                "segments": [{"base_offset": 0, "verdict": "keep", "detail": "age 5 ms \u2264 7"}, {}],
                "after": 1.5,
                "cleaner": {"dirty_ratio": 0.0, "would_clean": False, "nan": float("nan")},
                "empty": [],
            }
        ]
    }
    assert dumps_indented(document) == json.dumps(document, indent=2)


class Verdict(enum.Enum):
    KEEP = "keep"


class Size(enum.IntEnum):
    ONE = 1


@pytest.mark.parametrize(
    "document",
    [{"a": [{1: "x", None: 2, 1.5: 3}]}, {"d": [Size.ONE]}, {"e": {"f": Size.ONE, "g": [1]}}],
    ids=["keys-not-strings", "int-enum-in-a-list", "int-enum-beside-nesting"],
)
def test_what_json_dumps_converts_goes_the_same_way(document: object) -> None:
    assert dumps_indented(document) == json.dumps(document, indent=2)


@pytest.mark.parametrize(
    "document", [{"a": Verdict.KEEP}, {"b": [{"c": Verdict.KEEP}]}], ids=["top", "nested"]
)
def test_what_json_dumps_refuses_is_refused_the_same_way(document: object) -> None:
    with pytest.raises(TypeError) as expected:
        json.dumps(document, indent=2)
    with pytest.raises(TypeError, match=str(expected.value)):
        dumps_indented(document)


@given(st.lists(documents, max_size=6), st.integers(min_value=0, max_value=6))
def test_an_array_written_in_parts_is_laid_out_as_json_dumps_indent_2(items: list[object], cut: int) -> None:
    parts = [dumps_indented_items(items[:cut], 1), dumps_indented_items(items[cut:], 1)]
    assert indented_array_document("partitions", parts) == json.dumps({"partitions": items}, indent=2)


@given(st.lists(documents, min_size=1, max_size=4), st.integers(min_value=0, max_value=3))
def test_items_at_any_depth_are_laid_out_as_json_dumps_lays_them_out_there(
    items: list[object], depth: int
) -> None:
    nested: object = items  # the array ``depth`` objects deep: {"k": {"k": [items]}} for depth 2
    for _ in range(depth):
        nested = {"k": nested}
    text = json.dumps(nested, indent=2)
    start = text.index("[\n") + 2
    end = text.rindex("\n" + "  " * depth + "]")
    assert dumps_indented_items(items, depth) == text[start:end]


def test_items_json_dumps_converts_and_the_members_before_them_are_laid_out_as_json_dumps() -> None:
    items: list[object] = [{"size": Size.ONE, "reason": "time"}, {"segments": [Size.ONE, 2]}, None]
    before = {"ignored_broker_keys": ["x.y", "z"], "count": 3}
    parts = [
        dumps_indented_items(items[:2], 1),
        dumps_indented_items([], 1),
        dumps_indented_items(items[2:], 1),
    ]
    expected = json.dumps({**before, "partitions": items}, indent=2)
    assert indented_array_document("partitions", parts, before=before) == expected
    assert indented_array_document("partitions", [""], before=before) == json.dumps(
        {**before, "partitions": []}, indent=2
    )

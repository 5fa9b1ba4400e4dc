"""``api.problems``: every error as ``application/problem+json``, Starlette's own 404 and 405 included."""

from __future__ import annotations

import json

import pytest

from api.problems import PROBLEM_JSON, field_name, invalid, problem_response, validation_problem
from tests.api.conftest import Served, assert_problem


def test_unknown_routes_and_methods_are_problems(served: Served) -> None:
    assert_problem(served.client.get("/v1/nothing-here"), 404)
    assert_problem(served.client.put("/v1/topics"), 405)


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        (("body", "records", 3, "value", "BINARY", "data"), "records[3].value.data"),
        (("query", "max_records"), "max_records"),
        (("path", "partition"), "partition"),
        (("body",), "body"),
        ((), "body"),
        (("records", 0, "key", "STRING", "data"), "records[0].key.data"),
    ],
)
def test_a_field_is_named_as_the_request_writes_it(loc: tuple[int | str, ...], expected: str) -> None:
    assert field_name(loc) == expected


def test_a_validation_problem_names_each_field_the_first_in_its_detail() -> None:
    problem = validation_problem(
        [
            {"loc": ("body", "records", 1, "timestamp"), "msg": "Value error, must be at least -1"},
            {"loc": ("body", "count"), "msg": "Input should be a valid integer", "type": "int_parsing"},
        ]
    )

    assert problem.status_code == 422
    assert problem.detail == "records[1].timestamp: must be at least -1 (and 1 more)"
    assert [(e.field, e.message) for e in problem.errors] == [
        ("records[1].timestamp", "must be at least -1"),
        ("count", "Input should be a valid integer"),
    ]


def test_unreadable_json_is_the_bodys_problem_and_no_error_is_still_one() -> None:
    broken = validation_problem(
        [{"loc": ("body", 17), "msg": "JSON decode error", "type": "json_invalid", "ctx": {"error": "EOF"}}]
    )
    empty = validation_problem([])

    assert broken.detail == "body: not a JSON document: EOF"
    assert (empty.detail, [e.field for e in empty.errors]) == ("body: invalid request", ["body"])


def test_at_most_fifty_field_errors_are_kept() -> None:
    problem = validation_problem([{"loc": ("body", "records", i), "msg": "bad"} for i in range(80)])

    assert len(problem.errors) == 50
    assert problem.detail == "records[0]: bad (and 79 more)"


def test_a_problem_response_is_problem_json_with_its_kind_and_extensions() -> None:
    response = problem_response(416, "offset 9 is out of range", extensions={"log_start_offset": 0})
    invalid_count = invalid("count", "must be positive")

    assert response.status_code == 416
    assert response.headers["content-type"] == PROBLEM_JSON
    assert json.loads(bytes(response.body)) == {
        "type": "urn:logcleaner:problem:offset-out-of-range",
        "title": "Offset out of range",
        "status": 416,
        "detail": "offset 9 is out of range",
        "log_start_offset": 0,
    }
    assert (invalid_count.status_code, invalid_count.detail) == (422, "count: must be positive")
    assert [(e.field, e.message) for e in invalid_count.errors] == [("count", "must be positive")]

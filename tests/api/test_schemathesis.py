"""Schemathesis against the service's own OpenAPI document, on a live server: no 5xx, and every answer
matches what the document says (status codes, content types, bodies).

Both valid (positive) and invalid (negative) requests are generated for each operation, a bounded number
each, so the run stays well under a minute. Not checked: that every schema-valid request is accepted —
a config value or an offset can be schema-valid and still not allowed (422), which JSON Schema cannot say.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.api.conftest import Served, serve_daemon

EXAMPLES_PER_MODE = 25


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_daemon(tmp_path_factory.mktemp("fuzzed")) as served:
        # Something to find: a topic with records and a compacted one.
        served.client.post("/v1/topics", json={"name": "orders", "partitions": 2})
        served.client.post("/v1/topics", json={"name": "c", "configs": {"cleanup.policy": "compact"}})
        record = {"key": {"type": "STRING", "data": "k"}, "value": {"type": "STRING", "data": "v"}}
        for topic in ("orders", "c"):
            served.client.post(f"/v1/topics/{topic}/partitions/0/records", json={"records": [record] * 3})
        yield served


def test_generated_requests_get_documented_answers_and_no_5xx(fuzzed: Served) -> None:
    base_url = f"http://127.0.0.1:{fuzzed.port}"
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        if not isinstance(result, Ok):
            failures.append(f"the document has an invalid operation: {result.err()}")
            continue
        operation = result.ok()
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES_PER_MODE,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def run(case: Case[Any]) -> None:
                case.call_and_validate(base_url=base_url, excluded_checks=[positive_data_acceptance])

            try:
                run()
            except Unsatisfiable:
                continue  # nothing to make invalid (no parameters, no body)
            except BaseException as exc:  # schemathesis reports a group of failures
                failures.append(f"{operation.label} ({mode.value}): {_summary(exc)}")
    assert operations >= 20
    assert not failures, "\n\n".join(failures)


def _summary(exc: Any) -> str:
    inner = getattr(exc, "exceptions", ())
    return (str(exc) + "".join(f"\n  - {e!r}: {e}" for e in inner))[:3000]

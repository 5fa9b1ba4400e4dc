"""``BoundedJsonRoute`` (``api.json_body``) on a real server: a JSON number Python cannot read (over 4300
digits) is the range error of the key or field it was given for, a 422 naming it, not a parse error."""

from __future__ import annotations

import pytest

from tests.api.conftest import Served, assert_problem, disk_snapshot


@pytest.mark.parametrize("digits", [4301, 5000])
def test_a_config_number_python_cannot_read_is_422_naming_the_key(
    served: Served, topic: str, digits: int
) -> None:
    """A JSON number of over 4300 digits (Python's limit): the key's range error, not a parse error."""
    before = disk_snapshot(served.log_dir)
    patch = b'{"set": {"retention.ms": %s}}' % (b"9" * digits)
    response = served.client.patch(
        f"/v1/topics/{topic}/configs", content=patch, headers={"content-type": "application/json"}
    )
    body = assert_problem(response, 422, field="set.retention.ms")
    assert "LONG" in str(body["detail"]) and len(str(body["detail"])) < 500
    create = b'{"name": "huge", "partitions": %s}' % (b"1" * digits)
    response = served.client.post("/v1/topics", content=create, headers={"content-type": "application/json"})
    assert_problem(response, 422, field="partitions")
    assert disk_snapshot(served.log_dir) == before

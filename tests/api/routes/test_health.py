"""``/healthz`` and ``/readyz`` over HTTP: open, and 200 once the logs are loaded."""

from __future__ import annotations

import pytest

from tests.api.conftest import Served


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health(served: Served, path: str) -> None:
    assert served.client.get(path).status_code == 200

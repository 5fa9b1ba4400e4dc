"""``BoundedJsonRoute``: JSON bodies whose numbers Python can read, so a huge one is a 422 naming its field.

Python refuses to read an integer of over 4300 digits (a guard against quadratic parsing), and FastAPI then
answers "There was an error parsing the body" without saying where. Routes of this class read such a number
as its digits, a string: a config value of that many digits is then out of its key's range (422 naming the
key), and a number field refuses a string (422 naming the field). Nothing else about the body changes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

__all__ = ["BoundedJsonRoute"]

_MAX_DIGITS = sys.get_int_max_str_digits() or 4300


def _read_int(text: str) -> int | str:
    return int(text) if len(text.lstrip("-")) <= _MAX_DIGITS else text


class _BoundedJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = json.loads(await self.body(), parse_int=_read_int)
        return self._json


class BoundedJsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            return await handler(_BoundedJsonRequest(request.scope, request.receive))

        return bounded

"""Errors as ``application/problem+json`` (RFC 9457): one table from our errors to HTTP statuses.

Every 4xx/5xx the API sends has ``type``, ``title``, ``status`` and ``detail``. A 422 adds ``errors``
(``[{"field", "message"}]``, the field as ``records[3].value.data``); a 416 adds the valid range
(``log_start_offset``, ``log_end_offset``); a 409 refusing a request the topic's policy forbids adds
``"error": "POLICY_VIOLATION"`` and the ``cleanup_policy`` (Kafka's ``PolicyViolationException``).
FastAPI's own request-validation errors and Starlette's 404/405 become problems too, and so does anything
unexpected (500, logged with its traceback).

A detail never names a file by its absolute path: corrupt data is described by its reason (the daemon's
log has the file and position), and a file below a log dir is named relative to it (``t-0/….log``). A log
dir itself is named where it is the subject (a 503 for an offline dir): it is configuration, not a file.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.base.errors import (
    ConflictError,
    CorruptDataError,
    InvalidInputError,
    LogCleanerError,
    LogDirOfflineError,
    NotFoundError,
    OffsetOutOfRangeError,
    PolicyViolationError,
)

__all__ = [
    "PROBLEM_JSON",
    "ApiProblem",
    "FieldError",
    "Problem",
    "field_name",
    "install_problem_handlers",
    "invalid",
    "problem_response",
    "problem_responses",
    "validation_problem",
]

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
_TYPE_PREFIX = "urn:logcleaner:problem:"

# status → (type suffix, title); the title is fixed per type, the detail says what happened.
_KINDS: Mapping[int, tuple[str, str]] = {
    400: ("bad-request", "Bad request"),
    401: ("unauthorized", "Authentication required"),
    403: ("forbidden", "Forbidden"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    409: ("conflict", "Conflict"),
    413: ("too-large", "Request too large"),
    415: ("unsupported-media-type", "Unsupported media type"),
    416: ("offset-out-of-range", "Offset out of range"),
    421: ("misdirected-request", "Misdirected request"),
    422: ("invalid-input", "Invalid input"),
    500: ("internal-error", "Internal error"),
    503: ("unavailable", "Service unavailable"),
}

# Our errors → status, most specific first (OffsetOutOfRangeError is also an InvalidInputError).
_STATUS_BY_ERROR: tuple[tuple[type[LogCleanerError], int], ...] = (
    (LogDirOfflineError, 503),
    (OffsetOutOfRangeError, 416),
    (NotFoundError, 404),
    (ConflictError, 409),
    (InvalidInputError, 422),
    (CorruptDataError, 500),
)


class FieldError(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem document; 422s carry ``errors``, 416s the valid offset range."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None


class ApiProblem(StarletteHTTPException):
    """Raised inside ``api/`` to answer with a problem; passes through FastAPI's body parsing untouched."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        errors: Sequence[FieldError] = (),
        headers: Mapping[str, str] | None = None,
        extensions: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(status_code=status, detail=detail, headers=dict(headers) if headers else None)
        self.errors = list(errors)
        self.extensions = dict(extensions or {})


def invalid(field: str, message: str) -> ApiProblem:
    """A 422 naming ``field``."""
    return ApiProblem(422, f"{field}: {message}", errors=[FieldError(field=field, message=message)])


def problem_response(
    status: int,
    detail: str,
    *,
    errors: Sequence[FieldError] = (),
    headers: Mapping[str, str] | None = None,
    extensions: Mapping[str, object] | None = None,
) -> JSONResponse:
    kind, title = _KINDS.get(status, ("error", "Error"))
    body: dict[str, object] = {
        "type": _TYPE_PREFIX + kind,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = [e.model_dump() for e in errors]
    body.update(extensions or {})
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: each status documented as a problem+json ``Problem``."""
    return {
        status: {
            "model": Problem,
            "description": _KINDS[status][1],
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


def field_name(loc: Sequence[int | str]) -> str:
    """``("body", "records", 3, "value", "BINARY", "data")`` → ``records[3].value.data``.

    The request part (body, query, path) and the discriminator tags of record data are left out.
    """
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    name = ""
    for part in parts:
        if isinstance(part, int):
            name += f"[{part}]"
        elif part not in ("STRING", "BINARY", "JSON"):
            name += f".{part}" if name else part
    return name or "body"


def validation_problem(errors: Sequence[Mapping[str, Any]]) -> ApiProblem:
    """A 422 from pydantic's (or FastAPI's) error list, one ``FieldError`` each, the first in the detail."""
    fields = []
    for error in errors:
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        ctx = error.get("ctx")
        field = field_name(error.get("loc", ()))
        if error.get("type") == "json_invalid":  # its loc ends in the character position, not a field
            field = "body"
            if isinstance(ctx, Mapping) and "error" in ctx:
                message = f"not a JSON document: {ctx['error']}"
        fields.append(FieldError(field=field, message=message))
    if not fields:
        fields.append(FieldError(field="body", message="invalid request"))
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return ApiProblem(422, f"{fields[0].field}: {fields[0].message}{more}", errors=fields[:50])


def _render(problem: ApiProblem) -> JSONResponse:
    return problem_response(
        problem.status_code,
        str(problem.detail),
        errors=problem.errors,
        headers=problem.headers,
        extensions=problem.extensions,
    )


async def _on_api_problem(_request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, ApiProblem):
        raise TypeError(f"unexpected exception {exc!r}")
    return _render(exc)


async def _on_http_exception(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, StarletteHTTPException):
        raise TypeError(f"unexpected exception {exc!r}")
    if exc.status_code == 400:  # FastAPI: "There was an error parsing the body"
        return _render(invalid("body", str(exc.detail)))
    detail = f"{request.method} {request.url.path}: {exc.detail}"  # no such route, or method
    return problem_response(exc.status_code, detail, headers=exc.headers)


async def _on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, (RequestValidationError, ValidationError)):
        raise TypeError(f"unexpected exception {exc!r}")
    return _render(validation_problem(list(exc.errors())))


def _without_paths(request: Request, text: str) -> str:
    """``text`` with each file below a log dir named relative to it (longest log dir first)."""
    context = getattr(request.app.state, "context", None)
    service = getattr(context, "service", None)
    log_dirs = getattr(getattr(service, "logs", None), "log_dirs", ())
    for log_dir in sorted((str(d) for d in log_dirs), key=len, reverse=True):
        text = text.replace(log_dir.rstrip("/") + "/", "")
    return text


async def _on_log_cleaner_error(request: Request, exc: Exception) -> JSONResponse:
    status = next((s for cls, s in _STATUS_BY_ERROR if isinstance(exc, cls)), 500)
    if status == 500:
        logger.error("Request failed: %s", exc, exc_info=exc)
        if isinstance(exc, CorruptDataError):
            detail = f"corrupt data: {exc.reason} (the daemon's log names the file)"
        else:
            detail = f"{type(exc).__name__}: {exc}"
        return problem_response(500, _without_paths(request, detail))
    if isinstance(exc, OffsetOutOfRangeError):
        return problem_response(
            416,
            f"{exc}; the valid range is [{exc.log_start_offset}, {exc.log_end_offset}]",
            extensions={"log_start_offset": exc.log_start_offset, "log_end_offset": exc.log_end_offset},
        )
    if isinstance(exc, PolicyViolationError):
        return problem_response(
            409,
            str(exc),
            extensions={"error": "POLICY_VIOLATION", "cleanup_policy": exc.policy},
        )
    if status == 422:
        name = getattr(exc, "name", None)  # InvalidConfigError names the config
        field = name if isinstance(name, str) else "body"
        message = _without_paths(request, str(exc))
        return _render(ApiProblem(422, message, errors=[FieldError(field=field, message=message)]))
    return problem_response(status, _without_paths(request, str(exc)))


async def _on_unexpected(_request: Request, exc: Exception) -> JSONResponse:
    # Starlette re-raises after this response is sent, and uvicorn logs the traceback then.
    return problem_response(500, f"unexpected {type(exc).__name__}; the daemon's log has the traceback")


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiProblem, _on_api_problem)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(ValidationError, _on_validation_error)
    app.add_exception_handler(LogCleanerError, _on_log_cleaner_error)
    app.add_exception_handler(Exception, _on_unexpected)

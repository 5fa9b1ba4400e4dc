"""The OpenAPI document: FastAPI's, plus what it cannot see.

Routes that parse their own body (produce) get their request schema added to the components; limits
from the configuration (``max_records`` of a fetch) become the parameters' ``maximum``; with
``api.auth.token.file`` set, every ``/v1`` operation is marked as needing the bearer token and as
answering 401 with a problem. Every operation that takes a body may answer 415 (not JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from api.problems import PROBLEM_JSON

__all__ = ["install_openapi"]

_SCHEME = "bearer"


def install_openapi(
    app: FastAPI,
    *,
    raw_bodies: Mapping[str, type[BaseModel]],
    query_maximums: Mapping[str, int],
    auth: bool,
) -> None:
    """Replace ``app.openapi`` with a builder that adds ``raw_bodies`` (component name → model) and the
    configured ``maximum`` of query parameters (name → limit) that FastAPI checks no bound of."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        for name, model in raw_bodies.items():
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for def_name, definition in model_schema.pop("$defs", {}).items():
                schemas.setdefault(def_name, definition)
            schemas[name] = model_schema
        _set_query_maximums(schema, query_maximums)
        _answer_415_to_bodies(schema)
        if auth:
            _require_bearer(schema, components)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise it


def _require_bearer(schema: dict[str, Any], components: dict[str, Any]) -> None:
    components.setdefault("securitySchemes", {})[_SCHEME] = {"type": "http", "scheme": "bearer"}
    unauthorized = {
        "description": "Authentication required",
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for path, operations in schema.get("paths", {}).items():
        if path != "/v1" and not path.startswith("/v1/"):
            continue
        for operation in operations.values():
            operation["security"] = [{_SCHEME: []}]
            operation.setdefault("responses", {})["401"] = unauthorized


def _answer_415_to_bodies(schema: dict[str, Any]) -> None:
    """Every POST, PUT and PATCH may answer 415 (``JsonContentTypeGuard``): a body that is not JSON."""
    unsupported = {
        "description": "The body is not application/json",
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            if method in ("post", "put", "patch"):
                operation.setdefault("responses", {})["415"] = unsupported


def _set_query_maximums(schema: dict[str, Any], maximums: Mapping[str, int]) -> None:
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query" and parameter.get("name") in maximums:
                    target = parameter.setdefault("schema", {})
                    for option in target.get("anyOf", [target]):  # Optional[int] is anyOf int | null
                        if option.get("type") == "integer":
                            option["maximum"] = maximums[parameter["name"]]

"""The OpenAPI document describes every route docs/rest-api.md lists, its bodies and its problem responses."""

from __future__ import annotations

from tests.api.conftest import Served

CONTRACT_ROUTES = {
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/v1/topics"),
    ("post", "/v1/topics"),
    ("get", "/v1/topics/{topic}"),
    ("delete", "/v1/topics/{topic}"),
    ("get", "/v1/topics/{topic}/configs"),
    ("patch", "/v1/topics/{topic}/configs"),
    ("get", "/v1/topics/{topic}/partitions/{partition}"),
    ("post", "/v1/topics/{topic}/partitions/{partition}/records"),
    ("get", "/v1/topics/{topic}/partitions/{partition}/records"),
    ("post", "/v1/topics/{topic}/partitions/{partition}/delete-records"),
    ("get", "/v1/checkpoints"),
    ("get", "/v1/checkpoints/{name}"),
    ("post", "/v1/retention/run"),
    ("get", "/v1/retention/explain"),
    ("get", "/v1/cleaner"),
    ("post", "/v1/cleaner/run"),
    ("post", "/v1/cleaner/uncleanable/{topic}/{partition}/retry"),
    ("get", "/v1/scheduler/jobs"),
    ("get", "/v1/logs/failed"),
    ("get", "/v1/logs/stray"),
}


def test_every_contract_route_is_documented_with_its_problems(served: Served) -> None:
    document = served.client.get("/openapi.json").json()
    routes = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert routes >= CONTRACT_ROUTES
    problem = {"$ref": "#/components/schemas/Problem"}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            has_input = bool(operation.get("parameters")) or "requestBody" in operation
            if has_input:
                assert "422" in responses, (method, path)
            for status, response in responses.items():
                if status.startswith(("4", "5")):
                    assert response["content"]["application/problem+json"]["schema"] == problem, (
                        path,
                        status,
                    )
    produce = document["paths"]["/v1/topics/{topic}/partitions/{partition}/records"]["post"]
    assert produce["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ProduceRequest"
    }
    schemas = document["components"]["schemas"]
    assert schemas["ProduceRequest"]["properties"]["records"]["maxItems"] == 10_000
    assert {"RecordIn", "StringData", "BinaryData", "JsonData", "HeaderIn", "Problem"} <= schemas.keys()
    assert {"413", "404", "422"} <= produce["responses"].keys()
    fetch = document["paths"]["/v1/topics/{topic}/partitions/{partition}/records"]["get"]
    assert "416" in fetch["responses"]
    delete_records = document["paths"]["/v1/topics/{topic}/partitions/{partition}/delete-records"]["post"]
    assert {"409", "416"} <= delete_records["responses"].keys(), "policy violation, past the high watermark"
    assert {"StrayReplicas", "ExplainStrayReplica"} <= schemas.keys()
    assert "securitySchemes" not in document["components"], "no auth configured"


def test_the_docs_page_is_served(served: Served) -> None:
    page = served.client.get("/docs")
    assert page.status_code == 200 and "swagger" in page.text.lower()
    assert "/openapi.json" in page.text

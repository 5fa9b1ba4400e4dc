"""The API's routers, one module per resource."""

__all__: list[str] = []

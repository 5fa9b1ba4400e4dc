"""The REST API: FastAPI on uvicorn, inside the daemon; reaches the core only."""

__all__: list[str] = []

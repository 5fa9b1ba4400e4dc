"""Offline tools behind the CLI: dump and gen."""

__all__: list[str] = []

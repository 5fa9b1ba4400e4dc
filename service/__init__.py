"""logcleaner core: storage engine, configuration, log tasks."""

__all__: list[str] = []

"""logcleaner's service: the shell (``shell``: entry points, CLI, daemon, composition root, offline tools)
apart from the core it builds (``core``: the LogManager and its rules), which rests on the metadata log's
view of topics (``metadata``), configs (``config``), Kafka's on-disk format (``storage``) and leaf helpers
(``base``). ``pyproject.toml``'s import-linter contracts keep each layer to the ones below it."""

__all__: list[str] = []

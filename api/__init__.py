"""api package (see the design card)."""

__all__: list[str] = []
